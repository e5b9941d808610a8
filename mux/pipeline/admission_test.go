package pipeline

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// A full gate queues up to its bound, refuses beyond it at once, serves
// its queue in arrival order, and lets a waiter whose context ends go.
func TestGate(t *testing.T) {
	g := newGate(1, 3)
	ctx := context.Background()
	if err := g.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 3)
	var wg sync.WaitGroup
	cancelled, cancel := context.WithCancel(ctx)
	leftQueue := make(chan error, 1)
	for i := range 3 {
		if i == 1 {
			// The second waiter gives up while queued.
			wg.Go(func() { leftQueue <- g.acquire(cancelled) })
		} else {
			wg.Go(func() {
				if err := g.acquire(ctx); err != nil {
					t.Error(err)
					return
				}
				got <- i
			})
		}
		testsupport.WaitFor(t, "a call to queue", func() bool { return g.queued.Load() == int64(i+1) })
	}
	if err := g.acquire(ctx); !errors.Is(err, errBusy) {
		t.Fatalf("acquire on a full queue = %v, want errBusy", err)
	}
	cancel()
	if err := <-leftQueue; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v", err)
	}
	testsupport.WaitFor(t, "the cancelled call to leave the queue", func() bool { return g.queued.Load() == 2 })
	// Its place is free at once.
	extra := make(chan error, 1)
	wg.Go(func() { extra <- g.acquire(ctx) })
	testsupport.WaitFor(t, "a call to take the free place", func() bool { return g.queued.Load() == 3 })

	g.release()
	if first := <-got; first != 0 {
		t.Fatalf("waiter %d served first, want 0", first)
	}
	g.release()
	if second := <-got; second != 2 {
		t.Fatalf("waiter %d served second, want 2", second)
	}
	g.release()
	if err := <-extra; err != nil {
		t.Fatal(err)
	}
	g.release()
	wg.Wait()
	if len(g.slots) != 0 || g.queued.Load() != 0 {
		t.Fatalf("%d slots taken and %d queued after every call left", len(g.slots), g.queued.Load())
	}
}

// With no queue, a call beyond max_in_flight is refused at once.
func TestGateNoQueue(t *testing.T) {
	g := newGate(2, 0)
	for range 2 {
		if err := g.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.acquire(context.Background()); !errors.Is(err, errBusy) {
		t.Fatalf("got %v, want errBusy", err)
	}
}

func TestLimiters(t *testing.T) {
	var l limiters
	for i := range 3 {
		if !l.allow("alice", 0.001, 3) {
			t.Fatalf("call %d of a burst of 3 refused", i+1)
		}
	}
	if l.allow("alice", 0.001, 3) {
		t.Fatal("fourth call of a burst of 3 allowed")
	}
	if !l.allow("bob", 0.001, 3) {
		t.Fatal("another identity shares alice's bucket")
	}
	if msg := rateLimitedMessage("alice", 0.5, 3); msg != `rate limit exceeded for identity "alice": at most 0.5 calls per second (bursts of 3); try again later` {
		t.Errorf("message %q", msg)
	}
	if msg := rateLimitedMessage("", 10, 10); !strings.Contains(msg, "the anonymous identity") {
		t.Errorf("message %q", msg)
	}
}

// A change of the limit (a reload) applies to a bucket already spent: it
// keeps its tokens and refills at the new rate.
func TestLimitersRetuned(t *testing.T) {
	var l limiters
	if !l.allow("alice", 0.001, 1) || l.allow("alice", 0.001, 1) {
		t.Fatal("a burst of 1 at 0.001/s: want one call, then a refusal")
	}
	if l.allow("alice", 0.001, 3) {
		t.Fatal("a larger burst refilled the spent bucket at once")
	}
	if !l.allow("alice", 1e9, 3) {
		t.Fatal("a huge rate did not refill the bucket")
	}
	for i := range 3 {
		if !l.allow("alice", 1e9, 3) {
			t.Fatalf("call %d at a huge rate refused", i+1)
		}
	}
	if !l.allow("alice", 0.001, 3) || !l.allow("alice", 0.001, 3) {
		// Full at the huge rate: its 3 tokens are spent one by one.
		t.Fatal("the bucket lost the tokens it had when the rate went down")
	}
}

// Buckets that are full again are dropped once there are many, and those
// still spent are kept.
func TestLimitersSweep(t *testing.T) {
	var l limiters
	l.allow("spender", 0.001, 1) // spent for 1000s
	for i := range minSweep + 1 {
		// Each of these refills at once: a huge rate.
		l.allow(strings.Repeat("x", i+1), 1e9, 1)
	}
	// allow swept when the map passed minSweep; sweep again for the last.
	l.sweep()
	n := 0
	l.m.Range(func(k, _ any) bool { n++; return true })
	if _, ok := l.m.Load("spender"); !ok || n > minSweep/2 {
		t.Fatalf("after a sweep: %d buckets, spender kept: %v", n, ok)
	}
	if l.allow("spender", 0.001, 1) {
		t.Fatal("the spent bucket was replaced by a full one")
	}
}
