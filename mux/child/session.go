package child

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/mux/child/link"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// missedPings in a row mark a remote child's session lost.
const missedPings = 3

// Session is one generation of a child: a process on pipes, or a connection
// to a URL, with an initialized MCP session on it. It is lost once, for
// good; the supervisor then starts a new one.
type Session struct {
	client  *client.Client
	tr      transport.Interface
	proc    *childproc.Process // nil for a remote child
	started time.Time

	lost     chan struct{} // closed when the session is gone
	lostOnce sync.Once
	lostWhy  string             // valid once lost is closed
	lostAs   link.FailureReason // the kind of lostWhy; valid once lost is closed

	stdin   *childStdin   // stdio: what mcp-go writes to the child
	sse     bool          // the legacy SSE transport
	limit   int64         // max_message_bytes
	eof     chan struct{} // stdio: the child's stdout ended
	closing chan struct{} // closed by teardown, to stop the session's goroutines
	// stopping is set when mcpmux begins to stop the session (stop), and
	// the tool calls in flight (cuts: *context.CancelCauseFunc) are cut
	// then. Each call is one entry of the map, not a hook on a context all
	// the child's calls would share, whose lock every call would take.
	stopping atomic.Bool
	cuts     sync.Map
	wg       sync.WaitGroup
	ids      atomic.Uint64 // for mcpmux's own raw requests

	// pending counts the requests sent and not answered yet; quiet gets a
	// token whenever it drops to zero (Server.Drain).
	pending atomic.Int64
	quiet   chan struct{}

	// inflight maps the requests sent for clients to their calls.
	inflight inflight

	caps         mcp.ServerCapabilities // what the child declared in initialize
	instructions string                 // what its initialize answer told the model, if anything
}

// Limit is the session's max_message_bytes.
func (s *Session) Limit() int64 { return s.limit }

// Caps are what the child declared in its initialize answer.
func (s *Session) Caps() mcp.ServerCapabilities { return s.caps }

// TellRootsChanged sends the child notifications/roots/list_changed, if it
// was told mcpmux relays roots: its transport can carry a request of the
// child's (bidirectional); otherwise it does nothing.
func (s *Session) TellRootsChanged(ctx context.Context) error {
	if _, ok := s.tr.(transport.BidirectionalInterface); !ok {
		return nil
	}
	return s.tr.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationRootsListChanged)}})
}

func newSession(limit int64) *Session {
	s := &Session{
		limit:   limit,
		started: time.Now(),
		lost:    make(chan struct{}),
		eof:     make(chan struct{}),
		closing: make(chan struct{}),
		quiet:   make(chan struct{}, 1),
	}
	return s
}

// stop cuts every tool call in flight, and each one sent from now on.
func (s *Session) stop() {
	s.stopping.Store(true)
	s.cuts.Range(func(k, _ any) bool {
		(*k.(*context.CancelCauseFunc))(errStopped)
		return true
	})
}

// markLost records that the session is gone, why and what kind of failure
// that is; the first reason wins.
func (s *Session) markLost(as link.FailureReason, why string) {
	s.lostOnce.Do(func() {
		s.lostWhy, s.lostAs = why, as
		close(s.lost)
	})
}

// LostWhy says why the session was lost; "" while it is not.
func (s *Session) LostWhy() string {
	if !s.Lost() {
		return ""
	}
	return s.lostWhy
}

func (s *Session) Lost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// Failed tells whether err, from a request on this session, means the
// session itself is gone (the child died, or the connection did) rather
// than an error the child answered with. A transport that failed is never
// the child's answer: once Failed reports true the session is lost, and the
// call must be treated as interrupted, whatever else happens meanwhile.
func (s *Session) Failed(ctx context.Context, err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) && !errors.Is(err, transport.ErrTransportClosed) {
		return false
	}
	why, as := "request failed: "+err.Error(), link.LostReason(err)
	if s.proc == nil {
		s.markLost(as, why)
		return true
	}
	// A child's stdout can end a moment before the process is reaped; the
	// watcher in spawn usually decides within drainGrace, with the exit
	// status as the reason. A child whose pipe broke while it lives on (or
	// a call whose own time ran out first) cannot be waited for: the
	// session is ended here, and the child with it.
	t := time.NewTimer(2 * drainGrace)
	defer t.Stop()
	select {
	case <-s.lost:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	s.markLost(as, why)
	s.proc.Kill()
	return true
}

// Request sends a request and returns its raw result. A request made
// for a client (up, nil for one of mcpmux's own) is in the in-flight table
// while it lasts, and the client's _meta goes with it, its progress
// token, if it gave one, replaced by mcpmux's request id.
func (s *Session) Request(ctx context.Context, up *Call, method string, params map[string]any) (json.RawMessage, error) {
	id := s.nextID()
	call, ctx := s.inflight.add(ctx, up, id)
	defer s.inflight.remove(call)
	if call != nil {
		if meta := childMeta(ctx, up, id); meta != nil {
			params["_meta"] = meta
		}
	}
	raw, err := s.send(ctx, id, method, params)
	if err != nil && !errors.Is(err, link.ErrMessageTooLarge) && ctx.Err() != nil {
		s.cancel(id, context.Cause(ctx)) // as callTool does
	}
	return raw, err
}

// childMeta is the _meta of the request sent under id to the child for
// up: the client's own members but the protocol's, ctx's trace context
// (telemetry.MetaFor) and, if the client asked for progress, id as the
// progress token; nil when nothing is left.
func childMeta(ctx context.Context, up *Call, id mcp.RequestId) json.RawMessage {
	key, _ := idJSON(id)
	return telemetry.MetaFor(ctx, up.Meta.ForChild([]byte(key)), key)
}

// nextID returns an id for a request of mcpmux's own. String ids keep them
// apart from the numeric ones of the client's handshake and pings.
func (s *Session) nextID() mcp.RequestId {
	return mcp.NewRequestId("mcpmux-" + strconv.FormatUint(s.ids.Add(1), 10))
}

// CallTool sends tools/call for up under an id of mcpmux's own, so that a
// call given up on is cancelled on every transport (mcp-go's client sends
// notifications/cancelled over stdio only), and returns the raw result.
// args is sent as it is. An answer over max_message_bytes is an error
// wrapping errMessageTooLarge; isError is the result's own. While the
// call lasts it is in the in-flight table; the client's _meta goes with
// it, its progress token, if it gave one, replaced by the id, and the
// progress that came before the answer is written upstream before
// CallTool returns.
func (s *Session) CallTool(ctx context.Context, up *Call, name string, args json.RawMessage) (raw json.RawMessage, isError bool, err error) {
	id := s.nextID()
	call, ctx := s.inflight.add(ctx, up, id)
	defer s.inflight.remove(call)
	var tc *TaskCall
	if up != nil {
		tc = up.Task
	}
	params := mcp.CallToolParams{Name: name, Arguments: args, Task: tc.taskParams()}
	var meta json.RawMessage
	if call != nil {
		meta = childMeta(ctx, up, id)
	}
	sendCtx := ctx
	if s.sse {
		// mcp-go's SSE transport starts its own timer from the deadline and
		// fails a moment before the context does, which would look like a
		// dead server; the call's context alone decides when it is over.
		var cancel context.CancelCauseFunc
		sendCtx, cancel = context.WithCancelCause(context.WithoutCancel(ctx))
		defer cancel(nil)
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		defer stop()
	}
	// A call still in flight when mcpmux stops the session has been given
	// up on: it is cut at once, and what the child answers on its way out
	// (most often that it was cancelled) is not its answer.
	sendCtx, cut := context.WithCancelCause(sendCtx)
	defer cut(nil)
	s.cuts.Store(&cut, struct{}{})
	defer s.cuts.Delete(&cut)
	if s.stopping.Load() {
		cut(errStopped) // stop's Range may have run before the Store
	}
	var result json.RawMessage
	if tc != nil { // a task: its result comes from tasks/result (the root's tasks.go)
		result, err = s.callTask(sendCtx, id, tc, callParams{params, meta})
	} else {
		result, err = s.send(sendCtx, id, string(mcp.MethodToolsCall), callParams{params, meta})
	}
	if s.stopping.Load() {
		// Checked once more after the answer: the child may answer the
		// stop itself (its stdin is closed right after stopping is set), and
		// that answer can come before the cut above, which runs on a
		// goroutine of its own, has been seen.
		return nil, false, transport.NewError(errStopped)
	}
	if err != nil {
		if !errors.Is(err, link.ErrMessageTooLarge) && ctx.Err() != nil {
			s.cancel(id, context.Cause(ctx))
		}
		return nil, false, err
	}
	// Relayed as it is, so it must be what a client can read: a strict
	// client refuses the whole answer otherwise.
	if isError, err = checkCallResult(result); err != nil {
		return nil, false, err
	}
	return result, isError, nil
}

// callParams are the params of a tools/call to a child: the call's, and
// the client's _meta as it goes on (nil for none), as written.
type callParams struct {
	mcp.CallToolParams
	meta json.RawMessage
}

func (p callParams) MarshalJSON() ([]byte, error) {
	if b, ok := p.plainJSON(); ok {
		return b, nil
	}
	b, err := json.Marshal(p.CallToolParams)
	if err != nil || p.meta == nil {
		return b, err
	}
	return jsonwire.WithField(b, "_meta", p.meta)
}

// plainJSON is MarshalJSON of a call with JSON arguments and nothing but a
// name and a _meta beside them, written without reflection: the encoder
// that takes it compacts and escapes it, which makes the bytes the child
// gets those of MarshalJSON's general path.
func (p callParams) plainJSON() ([]byte, bool) {
	args, ok := p.Arguments.(json.RawMessage)
	if !ok || len(args) == 0 || p.Task != nil || p.Meta != nil || p.RawArguments != nil ||
		p.RequestState != "" || p.InputResponses != nil {
		return nil, false
	}
	b := make([]byte, 0, len(p.Name)+len(args)+len(p.meta)+32)
	b = append(b, `{"name":`...)
	if plainName(p.Name) {
		b = append(append(append(b, '"'), p.Name...), '"')
	} else {
		name, err := json.Marshal(p.Name)
		if err != nil {
			return nil, false
		}
		b = append(b, name...)
	}
	b = append(append(b, `,"arguments":`...), args...)
	if p.meta != nil {
		b = append(append(b, `,"_meta":`...), p.meta...)
	}
	return append(b, '}'), true
}

// plainName reports a name encoding/json writes as it is between quotes,
// HTML escaping and all.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// errStopped is why a call in flight is cut when mcpmux stops its
// child's session.
var errStopped = errors.New("stopped by mcpmux")

// ErrMalformedResult is wrapped by the error for a result a client could
// not read, which is never relayed.
var ErrMalformedResult = errors.New("a malformed result")

// cancel tells the child to stop working on request id; best effort.
func (s *Session) cancel(id mcp.RequestId, why error) {
	ctx, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	_ = s.tr.SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": why.Error()}},
		},
	})
}

// send sends a request and returns its raw result. An answer over
// max_message_bytes is an error wrapping errMessageTooLarge, and leaves the
// session as the transport left it (a stdio child's goes on). A remote
// child's answer with an HTTP status that fails the request (see
// limitedClient) is an *httpStatusError: the session goes on.
func (s *Session) send(ctx context.Context, id mcp.RequestId, method string, params any) (json.RawMessage, error) {
	s.pending.Add(1)
	defer s.answered()
	ctx, note := link.WithRequestNote(ctx, method)
	resp, err := s.tr.SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params,
	})
	switch {
	case err != nil && note.StatusErr() != nil:
		// The server answered this request, and only it, with a failure.
		return nil, note.StatusErr()
	case err != nil && !note.TooLarge.Load():
		return nil, transport.NewError(err)
	case err != nil || link.IsDropped(resp.Error):
		return nil, fmt.Errorf("its answer to %s %w (%s)", method, link.ErrMessageTooLarge, config.FormatSize(s.limit))
	case resp.Error != nil:
		return nil, &RPCError{Details: *resp.Error, err: resp.Error.AsError()}
	}
	return resp.Result, nil
}

// answered counts off one request of send's.
func (s *Session) answered() {
	if s.pending.Add(-1) == 0 {
		select {
		case s.quiet <- struct{}{}:
		default:
		}
	}
}

// idle waits until no request of send's is waiting for its answer, the
// session is lost, or ctx ends.
func (s *Session) idle(ctx context.Context) {
	for s.pending.Load() > 0 {
		select {
		case <-s.quiet:
		case <-s.lost:
			return
		case <-ctx.Done():
			return
		}
	}
}

// RPCError is a JSON-RPC error a child answered with. Its text is the
// child's message, as mcp-go's typed error has it; errorAnswer relays it
// to the client as the child sent it.
type RPCError struct {
	Details mcp.JSONRPCErrorDetails
	err     error // details.AsError()
}

func (e *RPCError) Error() string { return e.err.Error() }

func (e *RPCError) Unwrap() error { return e.err }

// relayedCapabilities are the client capabilities mcpmux declares to a
// child whose transport can carry the child's requests (stdio and
// streamable HTTP; not the legacy SSE transport).
func relayedCapabilities() mcp.ClientCapabilities {
	return mcp.ClientCapabilities{
		Roots: &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{ListChanged: true},
		Sampling:    &mcp.SamplingCapability{},
		Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}},
	}
}
