// Package fleet owns the children in force: the set of them the rest of
// the multiplexer reads, the goroutine that supervises each, and the
// changes of the server list while mcpmux runs.
package fleet

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/child"
)

// Deps are what a Fleet needs of the multiplexer around it.
type Deps struct {
	// New makes the (not yet running) child of a config entry.
	New func(config.Server) *child.Server
	// Rebuild builds and publishes the catalog from the set in force,
	// then calls published.
	Rebuild func(published func())
	// Regate has a child's calls take their turns under its config as it
	// is now (max_in_flight, max_queued).
	Regate func(*child.Server)
	// Initial is closed once every child's first start is over.
	Initial <-chan struct{}
	// CallTimeout bounds how long a child taken out of the list drains:
	// the call timeout in force when it is taken out.
	CallTimeout func() time.Duration
}

// Fleet is the children of the server list in force and their
// supervisors. Start runs them; Apply changes the list; Close stops them
// all and waits for every goroutine the Fleet started.
type Fleet struct {
	d   Deps
	set atomic.Pointer[child.Set]

	// mu serialises changes of the list and holds what they change: the
	// config entries in force and each child's run.
	mu      sync.Mutex
	entries []config.Server
	runs    map[*child.Server]*run

	ctx    context.Context // Start's; ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// run is one child's supervisor goroutine: stop ends it, done is closed
// once it has returned (its child stopped).
type run struct {
	stop context.CancelFunc
	done chan struct{}
}

// New returns the fleet of entries; it runs nothing until Start.
func New(d Deps, entries []config.Server) *Fleet {
	f := &Fleet{d: d, entries: entries, runs: map[*child.Server]*run{}}
	var list []*child.Server
	for _, e := range entries {
		list = append(list, d.New(e))
	}
	f.set.Store(child.NewSet(list, nil))
	return f
}

// Set is the set in force, swapped whole on each change of the list.
func (f *Fleet) Set() *atomic.Pointer[child.Set] { return &f.set }

// List is the children in force, in config order.
func (f *Fleet) List() []*child.Server { return f.set.Load().List() }

// Start runs every child under ctx; firstDone is called with each once its
// first start attempt has succeeded or failed (child.Server.Run).
func (f *Fleet) Start(ctx context.Context, firstDone func(*child.Server)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctx, f.cancel = context.WithCancel(ctx)
	for _, c := range f.List() {
		var once sync.Once
		f.runs[c] = f.run(c, func() { once.Do(func() { firstDone(c) }) })
	}
}

// Close stops every child and waits for the Fleet's goroutines.
func (f *Fleet) Close() {
	f.mu.Lock()
	cancel := f.cancel
	f.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	// An Apply under way ends soon once cancel is called; what it starts
	// meanwhile is counted in wg before the wait.
	f.mu.Lock()
	f.mu.Unlock() //nolint:staticcheck // a barrier, not a critical section
	f.wg.Wait()
}

// run starts c's supervisor, owned by wg. Under mu.
func (f *Fleet) run(c *child.Server, firstDone func()) *run {
	ctx, stop := context.WithCancel(f.ctx)
	r := &run{stop: stop, done: make(chan struct{})}
	f.wg.Go(func() {
		defer close(r.done)
		defer stop()
		c.Run(ctx, firstDone)
	})
	return r
}

// Changes says what Apply did to each server, by alias, in the order of
// the config (removed ones in the order they were listed).
type Changes struct {
	Added     []string // started
	Removed   []string // taken out of the catalog, drained, stopped
	Replaced  []string // started anew: the old child drained and stopped
	Reexposed []string // changed only in how it is exposed: applied to the running child
	Unchanged []string // left as they were
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Replaced)+len(c.Reexposed) == 0
}

// Apply puts entries, a validated server list, in force, comparing it
// with the one in force server by server: an unchanged server keeps its
// child, its sessions and its calls; an added one is started, its tools
// listed once it is ready; a removed one leaves the catalog at once, so
// that no new call reaches it, and stops once the calls it has in flight
// are answered (or CallTimeout has passed); one changed in how it starts
// is started anew first (up to its first start's end, or ctx's), then
// takes the calls from the old one, which drains and stops as a removed
// one does, or, under replace = "stop-first", the old one drains and stops
// before the new one starts, calls waiting for it as through a restart;
// one changed only in how it is exposed keeps its child, which reads its
// lists again under the new entry (child.Server.Reexpose).
//
// A list that changes nothing does nothing. A change made while the
// children's first starts are under way waits for them to end (or ctx's):
// the first catalog, and the pins of first sight, are built once for all.
// Apply returns once the catalog without the removed servers is published
// and the replacements have taken over; the draining goes on, owned by the
// Fleet, until Close at the latest.
func (f *Fleet) Apply(ctx context.Context, entries []config.Server) Changes {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx == nil || f.ctx.Err() != nil {
		return Changes{}
	}
	if reflect.DeepEqual(entries, f.entries) {
		ch := Changes{}
		for _, e := range entries {
			ch.Unchanged = append(ch.Unchanged, e.Alias)
		}
		return ch
	}
	select {
	case <-f.d.Initial:
	case <-ctx.Done():
		return Changes{}
	case <-f.ctx.Done():
		return Changes{}
	}
	was := f.set.Load()
	old := map[string]config.Server{}
	for _, e := range f.entries {
		old[e.Alias] = e
	}
	var ch Changes
	var next, retired []*child.Server
	var started []chan struct{} // the start-first replacements' first starts
	var after []func()          // the stop-first replacements, once the list is in force
	for _, e := range entries {
		prev, had := old[e.Alias]
		delete(old, e.Alias)
		switch {
		case had && reflect.DeepEqual(prev, e):
			ch.Unchanged = append(ch.Unchanged, e.Alias)
			next = append(next, was.Get(e.Alias))
		case had && startsAlike(prev, e):
			ch.Reexposed = append(ch.Reexposed, e.Alias)
			c := was.Get(e.Alias)
			c.Reexpose(e)
			f.d.Regate(c)
			next = append(next, c)
		case had && e.Replace == config.ReplaceStopFirst:
			ch.Replaced = append(ch.Replaced, e.Alias)
			c, start := f.startAfter(e, was.Get(e.Alias))
			next, after = append(next, c), append(after, start)
		case had:
			ch.Replaced = append(ch.Replaced, e.Alias)
			retired = append(retired, was.Get(e.Alias))
			first := make(chan struct{})
			started = append(started, first)
			next = append(next, f.start(e, first))
		default:
			ch.Added = append(ch.Added, e.Alias)
			next = append(next, f.start(e, nil))
		}
	}
	for _, e := range f.entries {
		if _, gone := old[e.Alias]; gone {
			ch.Removed = append(ch.Removed, e.Alias)
			retired = append(retired, was.Get(e.Alias))
		}
	}
	// A start-first replacement takes over once its first start is over:
	// a call that comes meanwhile still reaches the old child.
	for _, first := range started {
		f.wait(ctx, first)
	}
	gone := was.Gone()
	for _, c := range retired {
		if _, back := gone[c.Alias()]; !back {
			gone[c.Alias()] = c
		}
	}
	for _, c := range next {
		delete(gone, c.Alias())
	}
	f.set.Store(child.NewSet(next, gone))
	f.entries = entries
	published := make(chan struct{})
	f.d.Rebuild(func() { close(published) })
	f.wait(ctx, published)
	for _, c := range retired {
		f.retire(c)
	}
	for _, start := range after {
		start()
	}
	return ch
}

// wait waits for ch to close, ctx to end or the Fleet to close.
func (f *Fleet) wait(ctx context.Context, ch <-chan struct{}) {
	select {
	case <-ch:
	case <-ctx.Done():
	case <-f.ctx.Done():
	}
}

// startsAlike reports whether a and b start their child the same way, and
// differ at most in how it is exposed. A key not named here counts as one
// of how the child starts: a change to it starts the child anew.
func startsAlike(a, b config.Server) bool {
	for _, e := range []*config.Server{&a, &b} {
		e.Hide, e.ReadOnly, e.TrustAnnotations, e.Prefix, e.Roots = nil, nil, false, false, nil
		e.Required, e.MaxInFlight, e.MaxQueued, e.Replace = false, 0, 0, ""
	}
	return reflect.DeepEqual(a, b)
}

// start makes and runs the child of e, closing first (if not nil) once its
// first start is over. Under mu.
func (f *Fleet) start(e config.Server, first chan struct{}) *child.Server {
	c := f.d.New(e)
	var once sync.Once
	f.runs[c] = f.run(c, func() {
		if first != nil {
			once.Do(func() { close(first) })
		}
	})
	return c
}

// startAfter makes the child of e, which takes prev's place (child.Server.
// Inherit) once the list holding it is in force, and start, which has prev
// drain and stop and then c start. Both are called under mu.
func (f *Fleet) startAfter(e config.Server, prev *child.Server) (c *child.Server, start func()) {
	c = f.d.New(e)
	c.Inherit(prev)
	return c, func() { f.startWhenStopped(c, f.retire(prev)) }
}

// startWhenStopped runs c once stopped is closed, unless a later change of
// the list took c out meanwhile.
func (f *Fleet) startWhenStopped(c *child.Server, stopped <-chan struct{}) {
	f.wg.Go(func() {
		select {
		case <-stopped:
		case <-f.ctx.Done():
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.ctx.Err() == nil && slices.Contains(f.List(), c) {
			f.runs[c] = f.run(c, func() {})
		}
	})
}

// retire stops c once its calls in flight are answered, or CallTimeout
// has passed, on a goroutine of the Fleet's, and returns what is closed
// once c has stopped. Under mu.
func (f *Fleet) retire(c *child.Server) (stopped <-chan struct{}) {
	r := f.runs[c]
	delete(f.runs, c)
	if r == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	f.wg.Go(func() {
		ctx, cancel := context.WithTimeout(f.ctx, f.d.CallTimeout())
		c.Drain(ctx)
		cancel()
		r.stop()
		<-r.done
		c.Log().Info().Msg("server stopped: taken out of the config")
	})
	return r.done
}
