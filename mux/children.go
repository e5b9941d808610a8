package mux

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The multiplexer as its children's host: what a child publishes, and what
// its sessions receive that is not an answer to mcpmux's own request.

func (m childHost) Published(c *child.Server, old, st *child.State) {
	if old.Phase != st.Phase {
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

// Progress relays a child's notifications/progress to the call it names,
// under the client's own token; progress for a call that has ended, that
// is not in the table or whose client asked for none is dropped. It never
// blocks: it runs on the child transport's read goroutine.
func (m childHost) Progress(sess *child.Session, n mcp.JSONRPCNotification) {
	fields := n.Params.AdditionalFields
	key, err := json.Marshal(fields["progressToken"])
	if err != nil {
		return
	}
	c := sess.CallOf(string(key))
	if c == nil {
		return
	}
	params := make(map[string]any, len(fields))
	for k, v := range fields {
		params[k] = v
	}
	c.Enqueue(string(mcp.MethodNotificationProgress), params, func(to *upstream.Attachment) bool {
		params["progressToken"] = to.Token
		return to.Token != nil
	}, m.deliver)
}

// notifyCall sends a notification to the client of the upstream request
// a: down its edge at once, so that it is out before the call's answer
// (the edge writes its own answers from another goroutine); for a task,
// which has no request left to answer, to its session outside any call,
// waiting (with a growing pause, while the task lasts) when the session's
// queue is full.
func (m *Mux) notifyCall(a *upstream.Attachment, method string, params map[string]any) {
	if a.Out != nil {
		if line, err := upstream.NotificationLine(method, params); err == nil {
			a.Out.Notify(append(line, '\n'))
		}
		return
	}
	if a.Sess == nil {
		return
	}
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		err := m.sessions.Notify(a.Sess, method, params)
		if !errors.Is(err, server.ErrNotificationChannelBlocked) {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-a.Ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// childHost is the Mux as its children's host (child.Host).
type childHost struct{ *Mux }

// SubscribedURIs are the URIs of alias's resources that some session is
// subscribed to, to subscribe again on a new session of the child.
func (m childHost) SubscribedURIs(alias string) []string { return m.p.SubscribedURIs(alias) }

// ResourceUpdated relays a child's notifications/resources/updated to the
// sessions subscribed to it.
func (m childHost) ResourceUpdated(c *child.Server, n mcp.JSONRPCNotification) {
	m.p.ResourceUpdated(c, n)
}
