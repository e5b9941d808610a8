package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/mcpmux/mcpmux/mux/child"
)

// Admission: what a call must get before it is forwarded, besides the
// policy and a valid argument list: a token of its identity's rate limit,
// and a slot of its child's max_in_flight. Neither takes a lock shared by
// all calls: limiters are per identity, gates per child.

// errBusy marks a call refused because its child's queue was full.
var errBusy = errors.New("busy")

// admission holds the state of both: one gate per child and one limiter per
// identity, each created on first use. The zero value is ready.
type admission struct {
	gates    sync.Map // *child -> *gate
	limiters limiters
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

// limiters holds one token bucket per identity. Identities come and go, so
// when the map has grown past a high-water mark the buckets that are full
// again (indistinguishable from a new one) are dropped.
type limiters struct {
	m        sync.Map // identity -> *bucket
	n        atomic.Int64
	high     atomic.Int64
	sweeping atomic.Bool
}

// bucket is one identity's token bucket and the limit and burst it was
// last set to; only its Limiter changes after it is stored.
type bucket struct {
	*rate.Limiter
	limit float64
	burst int
}

// minSweep is the smallest number of limiters that makes a sweep worth it.
const minSweep = 1024

// allow takes one token of identity's bucket, refilled at limit per second
// up to burst, and reports whether there was one. A bucket made under
// another limit (before a reload) keeps its tokens and refills at the new
// one from now on.
func (l *limiters) allow(identity string, limit float64, burst int) bool {
	v, ok := l.m.Load(identity)
	if !ok {
		var loaded bool
		v, loaded = l.m.LoadOrStore(identity, &bucket{rate.NewLimiter(rate.Limit(limit), burst), limit, burst})
		if !loaded && l.n.Add(1) > max(minSweep, l.high.Load()) {
			l.sweep()
		}
	}
	b := v.(*bucket)
	if b.limit != limit || b.burst != burst {
		b.SetLimit(rate.Limit(limit))
		b.SetBurst(burst)
		nb := &bucket{b.Limiter, limit, burst}
		l.m.CompareAndSwap(identity, b, nb)
		b = nb
	}
	return b.Allow()
}

// sweep drops the full buckets, one sweep at a time. A call that loaded a
// bucket just before it was dropped spends a token nobody counts: at most
// one extra call per identity and sweep.
func (l *limiters) sweep() {
	if !l.sweeping.CompareAndSwap(false, true) {
		return
	}
	defer l.sweeping.Store(false)
	l.m.Range(func(k, v any) bool {
		if b := v.(*bucket); b.Tokens() >= float64(b.burst) {
			l.m.Delete(k)
			l.n.Add(-1)
		}
		return true
	})
	l.high.Store(2 * l.n.Load())
}

// rateLimitedMessage is what a caller refused by its rate limit is told.
func rateLimitedMessage(identity string, limit float64, burst int) string {
	who := "identity " + strconv.Quote(identity)
	if identity == "" {
		who = "the anonymous identity"
	}
	return fmt.Sprintf("rate limit exceeded for %s: at most %s calls per second (bursts of %d); try again later",
		who, strconv.FormatFloat(limit, 'f', -1, 64), burst)
}
