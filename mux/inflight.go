package mux

// The in-flight table: one per child session, it maps the id of each
// request mcpmux sent the child for a client (which is also the progress
// token the child was given) to that client's call: its upstream session,
// identity, own progress token and context. Progress, logging and the
// requests a child makes find their call here. Each table is its child
// session's alone; nothing in it is shared by the calls of other children.
// A call of a round (rounds.go) reaches the client through whichever
// upstream request of the round waits now: its entry names the round.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// inflight is one child session's table of requests in flight for clients.
type inflight struct {
	calls sync.Map      // request id (canonical JSON) -> *inCall
	seq   atomic.Uint64 // orders calls by when they were sent
}

// inCall is one request in flight on a child session for a client.
type inCall struct {
	key      string // the request id as canonical JSON, the table's key
	identity string
	seq      uint64
	task     *taskCall // the upstream task the call runs as; nil for none
	// own is the upstream request the call was made for; round, when not
	// nil, replaces it with the round's attached request.
	own   upstream.Attachment
	round Round

	mu      sync.Mutex
	queue   []queued       // notifications not yet written upstream
	writing bool           // a writer goroutine owns the queue
	idle    sync.Cond      // on mu: broadcast when writing turns false
	ended   bool           // the call has its answer: notifications are dropped
	wg      sync.WaitGroup // the writer goroutine
}

// attached returns the upstream request c's notifications and requests
// reach now; nil for a round's call between rounds.
func (c *inCall) attached() *upstream.Attachment {
	if c.round != nil {
		return c.round.Attached()
	}
	return &c.own
}

// queued is a notification for a call's client, in the order the child
// sent it: progress and log messages.
type queued struct {
	to     *upstream.Attachment
	method string
	params map[string]any
}

type callKey struct{}

// callFrom returns the call whose request a context was made for: the
// context mcp-go's streamable HTTP client hands the handler of a request the
// child sent on that call's response stream.
func callFrom(ctx context.Context) *inCall {
	c, _ := ctx.Value(callKey{}).(*inCall)
	return c
}

// add registers the request id, about to be sent for up, and returns its
// entry and ctx carrying it; nil and ctx unchanged for a request of
// mcpmux's own (up nil, or attached to no upstream request).
func (t *inflight) add(ctx context.Context, up *upCall, id mcp.RequestId) (*inCall, context.Context) {
	if up == nil || up.to == nil && up.round == nil {
		return nil, ctx
	}
	key, ok := idJSON(id)
	if !ok {
		return nil, ctx
	}
	c := &inCall{key: key, identity: up.identity, seq: t.seq.Add(1), round: up.round, task: up.task}
	if up.to != nil {
		c.own = *up.to
	}
	c.idle.L = &c.mu
	if c.round != nil {
		c.round.Bind(c)
	}
	t.calls.Store(c.key, c)
	return c, context.WithValue(ctx, callKey{}, c)
}

// idJSON is id as JSON, the form of the in-flight table's keys; the ids
// mcpmux makes (nextID) need no encoder.
func idJSON(id mcp.RequestId) (string, bool) {
	if s, ok := id.Value().(string); ok && jsonwire.PlainIDString(s) {
		return `"` + s + `"`, true
	}
	key, err := json.Marshal(id)
	return string(key), err == nil
}

// remove ends c: it leaves the table, progress that arrives from now on is
// dropped, and what came before is written upstream before remove returns,
// so that it precedes the call's answer.
func (t *inflight) remove(c *inCall) {
	if c == nil {
		return
	}
	t.calls.CompareAndDelete(c.key, c)
	c.mu.Lock()
	c.ended = true
	c.mu.Unlock()
	c.wg.Wait()
}

// lookup returns the call in flight under the JSON id key, or nil.
func (t *inflight) lookup(key string) *inCall {
	if v, ok := t.calls.Load(key); ok {
		return v.(*inCall)
	}
	return nil
}

// snapshot returns every call in flight.
func (t *inflight) snapshot() []*inCall {
	var out []*inCall
	t.calls.Range(func(_, v any) bool {
		out = append(out, v.(*inCall))
		return true
	})
	return out
}

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
	m.enqueue(c, string(mcp.MethodNotificationProgress), params, func(to *upstream.Attachment) bool {
		params["progressToken"] = to.Token
		return to.Token != nil
	})
}

// enqueue has a notification written to c's client, after those queued
// before it and before c's answer, if keep agrees for the upstream request
// it is for (keep may complete params for it); once c has ended, or
// between a round's requests, it is dropped. It never blocks.
func (m *Mux) enqueue(c *inCall, method string, params map[string]any, keep func(*upstream.Attachment) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	// Under c.mu, so that a round's detach, which flushes c, either finds
	// this queued or has it dropped.
	to := c.attached()
	if to == nil || !keep(to) {
		return
	}
	c.queue = append(c.queue, queued{to, method, params})
	if !c.writing {
		c.writing = true
		c.wg.Add(1)
		go m.writeQueued(c)
	}
}

// flush returns once what was queued for c so far has been written.
func (c *inCall) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.writing {
		c.idle.Wait()
	}
}

// writeQueued writes c's queued notifications upstream in order until the
// queue is empty.
func (m *Mux) writeQueued(c *inCall) {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.writing = false
			c.idle.Broadcast()
			c.mu.Unlock()
			return
		}
		n := c.queue[0]
		c.queue = c.queue[1:]
		c.mu.Unlock()
		m.notifyCall(n.to, n.method, n.params)
	}
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

// Round is the 2026-07-28 round a call runs in, as its call reaches it: a
// round's child call is retried on each of the client's requests, and what
// the child sends goes to whichever of them waits now.
type Round interface {
	// Attached is the upstream request waiting now; nil between rounds.
	Attached() *upstream.Attachment
	// Bind makes c the round's call, the latest attempt.
	Bind(c *inCall)
	// Ask hands a request the child sent during the call to the client.
	Ask(ctx context.Context, from *child, req transport.JSONRPCRequest) *transport.JSONRPCResponse
}
