package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// PolicyFor returns the policy of the caller of ctx.
func (m *Pipeline) PolicyFor(ctx context.Context) *policy.Policy {
	return m.policies.Current().For(upstream.IdentityFrom(ctx))
}

// ViewerOf returns the caller of ctx as its lists and tools are filtered.
func (m *Pipeline) ViewerOf(ctx context.Context) catalog.Viewer {
	v := catalog.Viewer{Policy: m.PolicyFor(ctx)}
	if len(v.Policy.Rules()) > 0 {
		v.Claims = upstream.ClaimsFrom(ctx)
	}
	return v
}

// requestPinned is request for the tool or prompt e of c (if not nil),
// refused with errHeldSince where the session it gets does not list e as
// e was looked up (stillPinned).
func (m *Pipeline) requestPinned(ctx context.Context, up *child.Call, c *child.Server, e *catalog.Entry, method string, params map[string]any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, m.settings.Load().CallTimeout)
	defer cancel()
	st, err := c.Ready(ctx)
	if err != nil {
		return nil, err
	}
	if e != nil && !m.pub.Pinning().StillPinned(st.Listed, e) {
		return nil, errHeldSince
	}
	sess := st.Session
	begun := time.Now()
	cctx, span := m.tracing.Client(ctx, method, telemetry.ClientTarget(params), c.Alias(), childTransport(c))
	raw, err := sess.Request(cctx, up, method, params)
	et := clientErrorType(err, false)
	telemetry.EndClient(span, et, err)
	m.observe.Operation(Operation{Client: true, Method: method, Server: c.Alias(), ErrorType: et, Took: time.Since(begun)})
	if err != nil {
		// Ended by its own context (the client gave up, its round ended,
		// the call timeout): the child, told to cancel, is not gone.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("server %s: %s: %w", c.Alias(), method, context.Cause(ctx))
		}
		if sess.Failed(ctx, err) {
			return nil, fmt.Errorf("server %s went away during %s: %s", c.Alias(), method, sess.LostWhy())
		}
		// The child's own error is the client's answer, as it would be
		// directly.
		var ce *child.RPCError
		if errors.As(err, &ce) {
			return nil, ce
		}
		return nil, fmt.Errorf("server %s: %s: %w", c.Alias(), method, err)
	}
	return raw, nil
}

// linkRewriter returns the rewrite of URIs that c put into a result: each
// becomes the form under which the mux exposes c's resources.
func linkRewriter(c *child.Server) func(string) (string, bool) {
	if !c.Config().Prefix {
		return func(string) (string, bool) { return "", false }
	}
	return func(uri string) (string, bool) { return naming.ExposeURI(c.Alias(), uri), true }
}

// RouteURI finds the child a resource URI, as a client gives it, belongs to
// and the child's own URI for it: a listed resource; a URI in mcpmux's
// scheme under the alias of a child that offers resources; a URI that one of the unprefixed children's templates matches
// (first in config order); or, when exactly one unprefixed child offers
// resources, any other URI.
func (m *Pipeline) RouteURI(cat *catalog.Catalog, uri string) (*child.Server, string, bool) {
	if e, ok := cat.Lookup(catalog.KindResource, uri); ok {
		return m.child(e.Server), e.Orig, true
	}
	if alias, orig, ok := naming.SplitURI(uri); ok {
		// Only a child that offers resources owns the URIs under its
		// alias; one that offers none must not be asked (it would answer
		// in its own words what is, to the caller, an unknown URI).
		if c := m.child(alias); c != nil && offersResources(c) {
			return c, orig, true
		}
	}
	var only *child.Server
	n := 0
	for _, e := range cat.Kinds[catalog.KindTemplate].List {
		c := m.child(e.Server)
		if c.Config().Prefix {
			continue
		}
		if e.Match(uri) {
			return c, uri, true
		}
	}
	for _, c := range m.children.Load().List() {
		if !c.Config().Prefix && offersResources(c) {
			only, n = c, n+1
		}
	}
	if n == 1 {
		return only, uri, true
	}
	return nil, "", false
}

// offersResources reports whether c's current catalog declares resources.
func offersResources(c *child.Server) bool {
	l := c.State().Listed
	return l != nil && l.Caps.Resources != nil
}

// child returns the child of alias, or nil.
func (m *Pipeline) child(alias string) *child.Server { return m.children.Load().Get(alias) }
