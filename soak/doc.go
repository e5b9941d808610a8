// Package soak holds the bounded chaos soak of mcpmux, run by `go test`:
// real mcpmux binaries with real labserver children, many concurrent
// callers over stdio and over the HTTP upstream with several identities, a
// random child SIGKILLed every 200 ms and the policy files rewritten every
// 500 ms (in place, by rename, and by a Kubernetes ConfigMap symlink swap).
// It judges mcpmux from the children's own records of what ran, and prints
// its figures. `go test ./soak -soak.duration=5m` runs it longer.
//
// The package has no code of its own besides this comment; everything is in
// its tests.
package soak
