//go:build race

package testsupport

// raceBuild: tests run with -race build the binaries they start with it too,
// so that mcpmux's own concurrency is checked end to end.
const raceBuild = true
