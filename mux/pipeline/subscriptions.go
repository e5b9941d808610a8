package pipeline

import (
	"context"

	"github.com/mcpmux/mcpmux/mux/subscriptions"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// ListenSubscriptions subscribes a 2026-07-28 listener to the resources its
// subscriptions/listen names (it has no resources/subscribe): each at its
// child, where the caller may read it. What cannot be subscribed is logged
// and left out; the stream itself stays.
func (m *Pipeline) ListenSubscriptions(ctx context.Context, u *upstream.Session, uris []string) {
	cat, p := m.catalog.Load(), m.PolicyFor(ctx)
	for _, uri := range uris {
		c, orig, ok := m.RouteURI(cat, uri)
		if !ok || !p.Allows(policy.Item{Kind: policy.Resource, Server: c.Alias()}) {
			continue
		}
		if err := m.subs.Subscribe(ctx, c, orig, uri, u); err != nil {
			c.Log().Warn().Ctx(ctx).Err(err).Str("child_uri", orig).Msg("subscribing a listener at the server failed")
		}
	}
}

// Subscriptions are the resource subscriptions of every session.
func (m *Pipeline) Subscriptions() *subscriptions.Table { return m.subs }
