package mux

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The multiplexer as its children's host: what a child publishes, and what
// its sessions receive that is not an answer to mcpmux's own request.

func (m *Mux) childPublished(c *child, old, st *childState) {
	if old.phase != st.phase {
		m.observe.ChildPhase(c.alias, st.phase)
	}
	if old.listed != st.listed && !m.starting.Load() {
		m.rebuildCatalog()
	}
}

func (m *Mux) childRestarted(c *child) { m.observe.ChildRestarted(c.alias) }

func (m *Mux) catalogRead() {
	if !m.starting.Load() { // otherwise Start returns it once for all
		m.memory.request()
	}
}

func (m *Mux) spawn(ctx context.Context, spec childproc.Spec) (*childproc.Process, error) {
	return m.spawner.Start(ctx, spec)
}

func (m *Mux) subscribedURIs(alias string) []string { return m.subs.uris(alias) }

// progress relays a child's notifications/progress to the call it names,
// under the client's own token; progress for a call that has ended, that
// is not in the table or whose client asked for none is dropped. It never
// blocks: it runs on the child transport's read goroutine.
func (m *Mux) progress(sess *session, n mcp.JSONRPCNotification) {
	fields := n.Params.AdditionalFields
	key, err := json.Marshal(fields["progressToken"])
	if err != nil {
		return
	}
	c := sess.inflight.lookup(string(key))
	if c == nil {
		return
	}
	params := make(map[string]any, len(fields))
	for k, v := range fields {
		params[k] = v
	}
	c.enqueue(string(mcp.MethodNotificationProgress), params, func(to *upstream.Attachment) bool {
		params["progressToken"] = to.Token
		return to.Token != nil
	}, m.notifyCall)
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
