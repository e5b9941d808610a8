package testsupport

import "testing"

var echoChild = &extraBinary{pkg: "./bench/echochild"}

// EchoChildBinary builds the benchmark's echo child (bench/echochild) once
// per test process, without -race, and returns its path.
func EchoChildBinary(t testing.TB) string {
	t.Helper()
	return echoChild.path(t)
}
