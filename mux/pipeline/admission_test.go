package pipeline

import (
	"context"
	"errors"
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
