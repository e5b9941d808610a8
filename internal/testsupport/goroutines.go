package testsupport

import (
	"runtime"
	"strings"
	"testing"
)

// CheckGoroutines fails tb if more than n goroutines are still running
// once the ones ending now have had time to.
func CheckGoroutines(tb testing.TB, n int) {
	tb.Helper()
	var stacks string
	count := 0
	if !Settles(func() bool {
		stacks, count = Goroutines()
		return count <= n
	}) {
		tb.Fatalf("%d goroutines running; want at most %d:\n%s", count, n, stacks)
	}
}

// Goroutines returns every goroutine's stack and how many there are,
// leaving out the signal loop, which the fuzzing engine starts and nothing
// ends.
func Goroutines() (string, int) {
	buf := make([]byte, 1<<20)
	stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	n := 0
	for _, s := range stacks {
		if !strings.Contains(s, "os/signal.loop") {
			n++
		}
	}
	return strings.Join(stacks, "\n\n"), n
}
