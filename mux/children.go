package mux

import (
	"context"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/mux/child"
)

// The multiplexer as its children's host: what a child publishes, and what
// its sessions receive that is not an answer to mcpmux's own request.

func (m childHost) Published(c *child.Server, old, st *child.State) {
	// A child replaced under its alias (fleet.Apply) no longer speaks for it.
	if old.Phase != st.Phase && m.fleet.Set().Load().Get(c.Alias()) == c {
		m.observe.ChildPhase(c.Alias(), st.Phase)
	}
	if old.Listed != st.Listed && !m.starting.Load() {
		m.pub.Rebuild()
	}
}

func (m childHost) Restarted(c *child.Server) { m.observe.ChildRestarted(c.Alias()) }

func (m childHost) CatalogRead() {
	if !m.starting.Load() { // otherwise Start returns it once for all
		m.memory.Request()
	}
}

func (m childHost) Spawn(ctx context.Context, spec childproc.Spec) (*childproc.Process, error) {
	return m.spawner.Start(ctx, spec)
}

// childHost is the Mux as its children's host (child.Host).
type childHost struct{ *Mux }

// SubscribedURIs are the URIs of alias's resources that some session is
// subscribed to, to subscribe again on a new session of the child.
func (m childHost) SubscribedURIs(alias string) []string { return m.p.Subscriptions().URIs(alias) }

// ResourceUpdated relays a child's notifications/resources/updated to the
// sessions subscribed to it.
func (m childHost) ResourceUpdated(c *child.Server, n mcp.JSONRPCNotification) {
	m.p.Subscriptions().Updated(c, n)
}

// The child's traffic to its clients goes through the relay.

func (m childHost) Request(ctx context.Context, c *child.Server, sess *child.Session, req transport.JSONRPCRequest) *transport.JSONRPCResponse {
	return m.relay.Request(ctx, c, sess, req)
}

func (m childHost) Log(c *child.Server, sess *child.Session, n mcp.JSONRPCNotification) {
	m.relay.Log(c, sess, n)
}

func (m childHost) ApplyLogLevel(ctx context.Context, c *child.Server, sess *child.Session) {
	m.relay.ApplyLogLevel(ctx, c, sess)
}

func (m childHost) Progress(sess *child.Session, n mcp.JSONRPCNotification) {
	m.relay.Progress(sess, n)
}
