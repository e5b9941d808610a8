// Package soak holds the bounded chaos soak of mcpmux, run by `go test`.
//
// Real mcpmux binaries serve real labserver children (sixteen, split among
// the mcpmux processes, each keeping its own record of every call it runs)
// to many concurrent callers: over stdio (two mcpmux processes, for two
// identities, sharing one policy directory) and over the HTTP upstream
// (three identities by bearer token). The callers mix fast and slow
// read-only calls with writes, each carrying a key unique in the run.
// Meanwhile a random ready child is SIGKILLed every 200 ms (each at most
// five times in a row, then left to rest, so that mcpmux's restart backoff
// never withdraws a child; the run fails unless 80% of the ticks killed
// one), and the policy files are rewritten every 500 ms in place, by rename
// and by a Kubernetes ConfigMap symlink swap, alternating one identity's
// grant.
//
// From the children's records it checks that no answer reached the wrong
// caller, no write ran twice, every acknowledged write ran exactly once,
// every call got an answer that says what happened, and from the processes
// that no child outlives mcpmux and that mcpmux's goroutines and RSS come
// back near their start. Each run prints its figures.
//
//	go test -race -v ./soak                              # 20 s per transport
//	go test -race -v ./soak -soak.duration=5m -soak.seed=N  # longer, or again
//
// The package has no code besides this comment; everything is in its tests.
package soak
