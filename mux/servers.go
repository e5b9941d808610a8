package mux

import (
	"context"
	"reflect"
	"slices"
	"sync"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/child"
)

// The server list in force, and its changes while mcpmux runs.

// childRun is one child's supervisor goroutine: stop ends it, done is
// closed once it has returned (its child stopped).
type childRun struct {
	stop context.CancelFunc
	done chan struct{}
}

// list is the children in force, in config order.
func (m *Mux) list() []*child.Server { return m.servers.Load().List() }

// run starts c's supervisor under the Mux's context, owned by m.wg.
// firstDone is as for child.Server.Run.
func (m *Mux) run(c *child.Server, firstDone func()) *childRun {
	ctx, stop := context.WithCancel(m.ctx)
	r := &childRun{stop: stop, done: make(chan struct{})}
	m.wg.Go(func() {
		defer close(r.done)
		defer stop()
		c.Run(ctx, firstDone)
	})
	return r
}

// Changes says what ApplyServers did to each server, by alias, in the
// order of the config (removed ones in the order they were listed).
type Changes struct {
	Added     []string // started
	Removed   []string // taken out of the catalog, drained, stopped
	Replaced  []string // a new child started; the old one drained, stopped
	Reexposed []string // changed only in how it is exposed: applied to the running child
	Unchanged []string // left as they were
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.Added)+len(c.Removed)+len(c.Replaced)+len(c.Reexposed) == 0
}

// ApplyServers puts entries, a validated server list, in force, comparing
// it with the one in force server by server: an unchanged server keeps its
// child, its sessions and its calls; an added one is started, its tools
// listed once it is ready; a removed one leaves the catalog at once, so
// that no new call reaches it, and stops once the calls it has in flight
// are answered (or call_timeout has passed); a changed one is started
// anew first (up to its first start's end, or ctx's), then takes the
// calls from the old one, which drains and stops as a removed one does; one
// changed only in how it is exposed keeps its child, which reads its lists
// again under the new entry (child.Server.Reexpose).
//
// A list that changes nothing does nothing. A change made while the
// children's first starts are under way waits for them to end (or ctx's):
// the first catalog, and the pins of first sight, are built once for all.
// It returns once the catalog without the removed servers is published
// and the replacements have taken over; the draining goes on, owned by the
// Mux, until Close at the latest.
func (m *Mux) ApplyServers(ctx context.Context, entries []config.Server) Changes {
	m.reload.Lock()
	defer m.reload.Unlock()
	if m.ctx == nil || m.ctx.Err() != nil {
		return Changes{}
	}
	if reflect.DeepEqual(entries, m.reload.entries) {
		ch := Changes{}
		for _, e := range entries {
			ch.Unchanged = append(ch.Unchanged, e.Alias)
		}
		return ch
	}
	select {
	case <-m.initial:
	case <-ctx.Done():
		return Changes{}
	case <-m.ctx.Done():
		return Changes{}
	}
	was := m.servers.Load()
	old := map[string]config.Server{}
	for _, e := range m.reload.entries {
		old[e.Alias] = e
	}
	var ch Changes
	var next []*child.Server
	var retired []*child.Server
	var started []chan struct{} // the replacements' first starts
	var after []func()          // stop-first replacements, once the list is in force
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
			m.p.Calls().Regate(c)
			next = append(next, c)
		case had && e.Replace == config.ReplaceStopFirst:
			ch.Replaced = append(ch.Replaced, e.Alias)
			c, start := m.startAfter(e, was.Get(e.Alias))
			next, after = append(next, c), append(after, start)
		case had:
			ch.Replaced = append(ch.Replaced, e.Alias)
			retired = append(retired, was.Get(e.Alias))
			first := make(chan struct{})
			started = append(started, first)
			next = append(next, m.start(e, first))
		default:
			ch.Added = append(ch.Added, e.Alias)
			next = append(next, m.start(e, nil))
		}
	}
	for _, e := range m.reload.entries {
		if _, gone := old[e.Alias]; gone {
			ch.Removed = append(ch.Removed, e.Alias)
			retired = append(retired, was.Get(e.Alias))
		}
	}
	// The replacements take over once their first start is over: a call
	// that comes meanwhile still reaches the old child.
	for _, first := range started {
		select {
		case <-first:
		case <-ctx.Done():
		case <-m.ctx.Done():
		}
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
	m.servers.Store(child.NewSet(next, gone))
	m.reload.entries = entries
	published := make(chan struct{})
	m.pub.RebuildThen(func() { close(published) })
	select {
	case <-published:
	case <-ctx.Done():
	case <-m.ctx.Done():
	}
	for _, c := range retired {
		m.retire(c)
	}
	for _, start := range after {
		start()
	}
	return ch
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
// first start is over. Under m.reload.
func (m *Mux) start(e config.Server, first chan struct{}) *child.Server {
	c := child.New(childHost{m}, m.env, e)
	var once sync.Once
	m.reload.runs[c] = m.run(c, func() {
		if first != nil {
			once.Do(func() { close(first) })
		}
	})
	return c
}

// startAfter makes the child of e, which takes prev's place (child.Server.
// Inherit) once the list holding it is in force, and start, which has prev
// drain and stop and then c start, on a goroutine of the Mux's. Both are
// called under m.reload.
func (m *Mux) startAfter(e config.Server, prev *child.Server) (c *child.Server, start func()) {
	c = child.New(childHost{m}, m.env, e)
	c.Inherit(prev)
	return c, func() { m.startWhenStopped(c, m.retire(prev)) }
}

// startWhenStopped runs c once stopped is closed, unless a later change of
// the list took c out meanwhile.
func (m *Mux) startWhenStopped(c *child.Server, stopped <-chan struct{}) {
	m.wg.Go(func() {
		select {
		case <-stopped:
		case <-m.ctx.Done():
			return
		}
		m.reload.Lock()
		defer m.reload.Unlock()
		// Not if a later change took it out again before it ran.
		if m.ctx.Err() == nil && slices.Contains(m.list(), c) {
			m.reload.runs[c] = m.run(c, func() {})
		}
	})
}

// retire stops c once its calls in flight are answered, or call_timeout
// has passed, on a goroutine of the Mux's. Under m.reload.
func (m *Mux) retire(c *child.Server) (stopped <-chan struct{}) {
	r := m.reload.runs[c]
	delete(m.reload.runs, c)
	if r == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	m.wg.Go(func() {
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Mux.CallTimeout)
		c.Drain(ctx)
		cancel()
		r.stop()
		<-r.done
		c.Log().Info().Msg("server stopped: taken out of the config")
	})
	return r.done
}
