package child

// The in-flight table: one per child session, it maps the id of each
// request mcpmux sent the child for a client (which is also the progress
// token the child was given) to that client's call: its upstream session,
// identity, own progress token and context. Progress, logging and the
// requests a child makes find their call here. Each table is its child
// session's alone; nothing in it is shared by the calls of other children.
// A call of a 2026-07-28 round (the root's rounds.go) reaches the client through whichever
// upstream request of the round waits now: its entry names the round.

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// inflight is one child session's table of requests in flight for clients.
type inflight struct {
	calls sync.Map      // request id (canonical JSON) -> *inCall
	seq   atomic.Uint64 // orders calls by when they were sent
}

// InCall is one request in flight on a child session for a client.
type InCall struct {
	key      string // the request id as canonical JSON, the table's key
	identity string
	seq      uint64
	task     *TaskCall // the upstream task the call runs as; nil for none
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
func (c *InCall) attached() *upstream.Attachment {
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
func callFrom(ctx context.Context) *InCall {
	c, _ := ctx.Value(callKey{}).(*InCall)
	return c
}

// add registers the request id, about to be sent for up, and returns its
// entry and ctx carrying it; nil and ctx unchanged for a request of
// mcpmux's own (up nil, or attached to no upstream request).
func (t *inflight) add(ctx context.Context, up *Call, id mcp.RequestId) (*InCall, context.Context) {
	if up == nil || up.To == nil && up.Round == nil {
		return nil, ctx
	}
	key, ok := idJSON(id)
	if !ok {
		return nil, ctx
	}
	c := &InCall{key: key, identity: up.Identity, seq: t.seq.Add(1), round: up.Round, task: up.Task}
	if up.To != nil {
		c.own = *up.To
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
func (t *inflight) remove(c *InCall) {
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
func (t *inflight) lookup(key string) *InCall {
	if v, ok := t.calls.Load(key); ok {
		return v.(*InCall)
	}
	return nil
}

// snapshot returns every call in flight.
func (t *inflight) snapshot() []*InCall {
	var out []*InCall
	t.calls.Range(func(_, v any) bool {
		out = append(out, v.(*InCall))
		return true
	})
	return out
}

// Enqueue has a notification written to c's client by deliver, after
// those queued before it and before c's answer, if keep agrees for the
// upstream request it is for (keep may complete params for it); once c has
// ended, or between a round's requests, it is dropped. It never blocks.
func (c *InCall) Enqueue(method string, params map[string]any, keep func(*upstream.Attachment) bool, deliver Deliver) {
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
		go c.writeQueued(deliver)
	}
}

// Flush returns once what was queued for c so far has been written.
func (c *InCall) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.writing {
		c.idle.Wait()
	}
}

// writeQueued writes c's queued notifications upstream in order until the
// queue is empty.
func (c *InCall) writeQueued(deliver Deliver) {
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
		deliver(n.to, n.method, n.params)
	}
}

// Round is the 2026-07-28 round a call runs in, as its call reaches it: a
// round's child call is retried on each of the client's requests, and what
// the child sends goes to whichever of them waits now.
type Round interface {
	// Attached is the upstream request waiting now; nil between rounds.
	Attached() *upstream.Attachment
	// Bind makes c the round's call, the latest attempt.
	Bind(c *InCall)
	// Ask hands a request the child sent during the call to the client.
	Ask(ctx context.Context, from *Server, req transport.JSONRPCRequest) *transport.JSONRPCResponse
}

// Deliver sends a notification to the client of the upstream request a.
type Deliver func(a *upstream.Attachment, method string, params map[string]any)

// Call is what a request mcpmux sends a child for an upstream request
// carries: whose it is, where what the child sends during it goes, and
// what of the client's request goes on to the child.
type Call struct {
	Identity string
	To       *upstream.Attachment // the upstream request; nil for a request of mcpmux's own
	Round    Round                // the 2026-07-28 round the call runs in; nil for none
	Task     *TaskCall            // the upstream task the call runs as; nil for none
	Meta     frame.Meta           // the client's _meta
}

// ErrAmbiguousCall is wrapped by Attribute's error when the calls in flight
// on a child session belong to more than one identity.
var ErrAmbiguousCall = errors.New("calls of more than one identity are in flight on it")

// Attribute finds the call that something a child sent on sess belongs to,
// and returns nil when no call is in flight. ctx is the context the child
// transport gave the request's handler: mcp-go's streamable HTTP client
// makes it from the context of the call whose response stream the request
// arrived on, which names the call exactly. Otherwise (a stdio child, a
// remote child's standalone stream, a notification) the calls in flight
// decide: if they all come from one identity, the most recent one; calls
// of several identities are an error, so that nothing of one identity's
// ever reaches another's session.
func (sess *Session) Attribute(ctx context.Context) (*InCall, error) {
	if c := callFrom(ctx); c != nil && sess.inflight.lookup(c.key) == c {
		return c, nil
	}
	var latest *InCall
	for _, c := range sess.inflight.snapshot() {
		if latest != nil && c.identity != latest.identity {
			return nil, ErrAmbiguousCall
		}
		if latest == nil || c.seq > latest.seq {
			latest = c
		}
	}
	return latest, nil
}

// CallOf returns the call in flight on sess under the request id key (as
// canonical JSON: also the progress token the child was given), or nil.
func (sess *Session) CallOf(key string) *InCall { return sess.inflight.lookup(key) }

// Own is the upstream request c was made for.
func (c *InCall) Own() *upstream.Attachment { return &c.own }

// Task is the upstream task c runs as; nil for none.
func (c *InCall) Task() *TaskCall { return c.task }

// Round is the 2026-07-28 round c runs in; nil for none.
func (c *InCall) Round() Round { return c.round }
