// Package ratelimit owns the per-identity token buckets of the call rate
// limit: one per identity, made on first use, dropped once full again when
// identities are many, retuned in place when the limit changes.
package ratelimit

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// Buckets holds one token bucket per identity. Identities come and go, so
// when the map has grown past a high-water mark the buckets that are full
// again (indistinguishable from a new one) are dropped.
type Buckets struct {
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

// Allow takes one token of identity's bucket, refilled at limit per second
// up to burst, and reports whether there was one. A bucket made under
// another limit (before a reload) keeps its tokens and refills at the new
// one from now on.
func (l *Buckets) Allow(identity string, limit float64, burst int) bool {
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
func (l *Buckets) sweep() {
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

// Message is what a caller refused by its rate limit is told.
func Message(identity string, limit float64, burst int) string {
	who := "identity " + strconv.Quote(identity)
	if identity == "" {
		who = "the anonymous identity"
	}
	return fmt.Sprintf("rate limit exceeded for %s: at most %s calls per second (bursts of %d); try again later",
		who, strconv.FormatFloat(limit, 'f', -1, 64), burst)
}
