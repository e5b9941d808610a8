package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/ratelimit"
)

// Admission: what a call must get before it is forwarded, besides the
// policy and a valid argument list: a token of its identity's rate limit,
// and a slot of its child's max_in_flight. Neither takes a lock shared by
// all calls: limiters are per identity, gates per child.

// errBusy marks a call refused because its child's queue was full.
var errBusy = errors.New("busy")

// admission holds the state of both: one gate per child and one token
// bucket per identity, each created on first use. The zero value is ready.
type admission struct {
	gates    sync.Map // *child -> *gate
	limiters ratelimit.Buckets
}

// gate returns c's gate.
func (a *admission) gate(c *child.Server) *gate {
	if g, ok := a.gates.Load(c); ok {
		return g.(*gate)
	}
	g, _ := a.gates.LoadOrStore(c, newGate(c.Config().MaxInFlight, c.Config().MaxQueued))
	return g.(*gate)
}

// gate bounds the calls forwarded to one child at once. A call that finds
// every slot taken waits in a queue of bounded length; one that finds the
// queue full too is refused.
//
// The slots are a buffered channel. Waiters are served in arrival order:
// when a slot is freed, the Go runtime hands it to the longest-waiting
// sender rather than to whoever comes next (gate_test checks this).
type gate struct {
	slots     chan struct{}
	maxQueued int64
	queued    atomic.Int64
}

func newGate(maxInFlight, maxQueued int) *gate {
	return &gate{slots: make(chan struct{}, max(1, maxInFlight)), maxQueued: int64(maxQueued)}
}

// acquire takes a slot, waiting for one in the queue while ctx lasts. It
// returns errBusy at once when the queue is full, or ctx's error when ctx
// ends first; a waiter whose ctx ends leaves the queue at once.
func (g *gate) acquire(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	if g.queued.Add(1) > g.maxQueued {
		g.queued.Add(-1)
		return errBusy
	}
	defer g.queued.Add(-1)
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release frees a slot taken by acquire.
func (g *gate) release() { <-g.slots }

// busyMessage is what a caller refused by g, the gate of server alias, is
// told.
func (g *gate) busyMessage(alias string) string {
	return fmt.Sprintf("server %s is busy: %d calls in flight and %d queued; try again later",
		alias, cap(g.slots), g.maxQueued)
}
