package relay

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Progress relays a child's notifications/progress to the call it names,
// under the client's own token; progress for a call that has ended, that
// is not in the table or whose client asked for none is dropped. It never
// blocks: it runs on the child transport's read goroutine.
func (m *Relay) Progress(sess *child.Session, n mcp.JSONRPCNotification) {
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
func (m *Relay) notifyCall(a *upstream.Attachment, method string, params map[string]any) {
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
