// Package subscriptions owns the resource subscriptions of every upstream
// session: which sessions subscribed to which child resource, under which
// URI, and the subscription at the child that they share.
package subscriptions

import (
	"context"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Table records which upstream sessions subscribed to which child
// resource, and under which URI each knows it, so that a child's
// notifications/resources/updated reaches exactly those sessions. A child
// is subscribed once, when its resource gets its first subscriber, and
// unsubscribed when it loses its last. Each subscription is held by its
// session, and ends with it (upstream.Session.OnEnd).
type Table struct {
	// request sends a request of mcpmux's own to a child; child finds one
	// by alias.
	request  func(ctx context.Context, c *child.Server, method string, params map[string]any) error
	child    func(alias string) *child.Server
	sessions *upstream.Registry
	log      zerolog.Logger

	mu      sync.Mutex // subscribing and updates only; never taken by a call
	byChild map[subKey]map[*upstream.Session]subscription
	// changing serialises, per resource, the change of its subscribers
	// with the request that tells the child, so that a subscribe and an
	// unsubscribe of the last subscriber cannot cross on their way.
	changing map[subKey]*keyLock

	// drops are the goroutines that end ended sessions' subscriptions
	// (held), stopped by ending dropCtx.
	dropMu   sync.Mutex
	dropCtx  context.Context // made with the first drop
	dropStop context.CancelFunc
	closed   bool
	drops    sync.WaitGroup
}

// New returns the table of sessions; request sends a request of mcpmux's
// own to a child, child finds one by alias.
func New(request func(ctx context.Context, c *child.Server, method string, params map[string]any) error,
	child func(alias string) *child.Server, sessions *upstream.Registry, log zerolog.Logger) *Table {
	return &Table{request: request, child: child, sessions: sessions, log: log}
}

// goDrop runs drop on a goroutine of its own under a context that close
// ends, unless close has been called.
func (s *Table) goDrop(drop func(context.Context)) {
	s.dropMu.Lock()
	defer s.dropMu.Unlock()
	if s.closed {
		return
	}
	if s.dropCtx == nil {
		s.dropCtx, s.dropStop = context.WithCancel(context.Background())
	}
	ctx := s.dropCtx
	s.drops.Go(func() { drop(ctx) })
}

// close ends the drops still running, and waits for them; later drops
// never start (the children they would tell are stopping).
func (s *Table) Close() {
	s.dropMu.Lock()
	s.closed = true
	if s.dropStop != nil {
		s.dropStop()
	}
	s.dropMu.Unlock()
	s.drops.Wait()
}

type keyLock struct {
	mu    sync.Mutex
	users int // holders and waiters; the entry goes with the last
}

// subKey names one resource of one child, by the child's own URI.
type subKey struct{ alias, uri string }

// subscription is one session's subscription to a resource: the URI the
// session knows it by, and what stops its end with the session.
type subscription struct {
	exposed string
	release func()
}

// lock takes k's lock; the function it returns releases it.
func (s *Table) lock(k subKey) func() {
	s.mu.Lock()
	if s.changing == nil {
		s.changing = map[subKey]*keyLock{}
	}
	l := s.changing[k]
	if l == nil {
		l = &keyLock{}
		s.changing[k] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.changing, k)
		}
		s.mu.Unlock()
	}
}

// add records that u subscribed to the child resource k as exposed, a
// subscription released by release.
func (s *Table) add(k subKey, u *upstream.Session, exposed string, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byChild == nil {
		s.byChild = map[subKey]map[*upstream.Session]subscription{}
	}
	if s.byChild[k] == nil {
		s.byChild[k] = map[*upstream.Session]subscription{}
	}
	if old, ok := s.byChild[k][u]; ok {
		old.release() // subscribed again: one end is enough
	}
	s.byChild[k][u] = subscription{exposed, release}
}

// remove forgets u's subscription to k. It reports whether u was
// subscribed, and whether k is left with no subscriber.
func (s *Table) remove(k subKey, u *upstream.Session) (was, last bool) {
	s.mu.Lock()
	sub, was := s.byChild[k][u]
	if was {
		delete(s.byChild[k], u)
		if last = len(s.byChild[k]) == 0; last {
			delete(s.byChild, k)
		}
	}
	s.mu.Unlock()
	if was {
		sub.release()
	}
	return was, last
}

// of returns the sessions subscribed to k, each with the URI it used.
func (s *Table) of(k subKey) map[*upstream.Session]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[*upstream.Session]string, len(s.byChild[k]))
	for u, sub := range s.byChild[k] {
		out[u] = sub.exposed
	}
	return out
}

// URIs returns the child's own URIs of alias's resources that some session
// is subscribed to.
func (s *Table) URIs(alias string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.byChild {
		if k.alias == alias {
			out = append(out, k.uri)
		}
	}
	return out
}

// Subscribe subscribes u to the resource orig of c, exposed as uri: at the
// child if it is the resource's first subscriber. The subscription ends
// with u (held).
func (s *Table) Subscribe(ctx context.Context, c *child.Server, orig, uri string, u *upstream.Session) error {
	k := subKey{c.Alias(), orig}
	defer s.lock(k)()
	release, ok := u.OnEnd(func() { s.held(k, u) })
	if !ok {
		return upstream.ErrSessionEnded
	}
	if len(s.of(k)) == 0 {
		if err := s.request(ctx, c, string(mcp.MethodResourcesSubscribe), map[string]any{"uri": orig}); err != nil {
			release()
			return err
		}
	}
	s.add(k, u, uri, release)
	return nil
}

// held ends u's subscription to k once u has ended, within a second, on a
// goroutine of its own: what ends sessions never waits for a child.
func (s *Table) held(k subKey, u *upstream.Session) {
	s.goDrop(func(ctx context.Context) {
		kctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		s.Unsubscribe(kctx, k.alias, k.uri, u)
	})
}

// Unsubscribe ends u's subscription to alias's resource orig: at the
// child if it was the resource's last subscriber. It is best effort: the
// child's refusal is logged.
func (s *Table) Unsubscribe(ctx context.Context, alias, orig string, u *upstream.Session) {
	k := subKey{alias, orig}
	defer s.lock(k)()
	if was, last := s.remove(k, u); !was || !last {
		return
	}
	c := s.child(k.alias)
	if c == nil {
		return
	}
	if err := s.request(ctx, c, string(mcp.MethodResourcesUnsubscribe), map[string]any{"uri": k.uri}); err != nil {
		c.Log().Warn().Err(err).Str("child_uri", k.uri).Msg("unsubscribing at the server failed")
	}
}

// Updated relays a child's notifications/resources/updated to
// every session subscribed to that resource, under the URI it used.
// It runs on the child's read goroutine and never blocks.
func (s *Table) Updated(c *child.Server, n mcp.JSONRPCNotification) {
	orig, _ := n.Params.AdditionalFields["uri"].(string)
	for u, exposed := range s.of(subKey{c.Alias(), orig}) {
		params := map[string]any{}
		for k, v := range n.Params.AdditionalFields {
			params[k] = v
		}
		params["uri"] = exposed
		if err := s.sessions.Notify(u, string(mcp.MethodNotificationResourceUpdated), params); err != nil {
			s.log.Warn().Err(err).Str("session", u.ID).Msg("could not send resources/updated")
		}
	}
}
