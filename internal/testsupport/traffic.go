package testsupport

import "testing"

var traffic = &extraBinary{pkg: "./internal/trafficchild/cmd/trafficchild", race: true}

// TrafficBinary builds the traffic test child (internal/trafficchild) once
// per test process and returns its path.
func TrafficBinary(t testing.TB) string {
	t.Helper()
	return traffic.path(t)
}
