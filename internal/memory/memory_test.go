package memory

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// A burst of requests while a run is in progress is served by one more run,
// and nothing else runs: not once per request.
func TestMemoryReturnCoalesces(t *testing.T) {
	var runs atomic.Int32
	first := make(chan struct{})
	let := make(chan struct{})
	r := NewReturner(func() {
		if runs.Add(1) == 1 {
			close(first)
			<-let
		}
	}, time.Millisecond)
	r.Request()
	<-first
	for range 100 {
		r.Request()
	}
	close(let)
	testsupport.WaitFor(t, "the second run", func() bool { return runs.Load() == 2 })
	// Wait for the goroutine to end on its own: close would drop a third run.
	testsupport.WaitFor(t, "the goroutine to end", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return !r.busy
	})
	r.Close()
	if n := runs.Load(); n != 2 {
		t.Errorf("%d runs for 101 requests, one of them during the first run; want 2", n)
	}
}

// The request after a run is served too, once the interval has passed.
func TestMemoryReturnServesTheLast(t *testing.T) {
	ran := make(chan struct{}, 3)
	r := NewReturner(func() { ran <- struct{}{} }, time.Millisecond)
	defer r.Close()
	for i := range 3 {
		r.Request()
		select {
		case <-ran:
		case <-time.After(testsupport.Wait):
			t.Fatalf("request %d was never served", i)
		}
	}
}

// close stops a goroutine that waits out its interval, and later requests
// start nothing.
func TestMemoryReturnClose(t *testing.T) {
	var runs atomic.Int32
	r := NewReturner(func() { runs.Add(1) }, time.Hour)
	r.Request()
	testsupport.WaitFor(t, "the first run", func() bool { return runs.Load() == 1 })
	r.Request() // waits for the hour
	r.Close()   // returns at once: the test would time out otherwise
	r.Request()
	r.mu.Lock()
	busy := r.busy
	r.mu.Unlock()
	if busy || runs.Load() != 1 {
		t.Errorf("after close: busy %v, %d runs; want idle and 1", busy, runs.Load())
	}
}
