package child

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/mux/child/link"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
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
	// stopping ends when mcpmux begins to stop the session (stopSession):
	// the calls still in flight are cut then.
	stopping context.Context
	stop     context.CancelFunc
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
	s.stopping, s.stop = context.WithCancel(context.Background())
	return s
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
		if meta := childMeta(up, id); meta != nil {
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
// up: the client's own members but the protocol's, and, if the client
// asked for progress, id as the progress token; nil when nothing is left.
func childMeta(up *Call, id mcp.RequestId) json.RawMessage {
	key, _ := idJSON(id)
	if meta := up.Meta.ForChild([]byte(key)); meta != nil {
		return meta
	}
	return nil
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
		meta = childMeta(up, id)
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
	defer context.AfterFunc(s.stopping, func() { cut(errStopped) })()
	var result json.RawMessage
	if tc != nil { // a task: its result comes from tasks/result (the root's tasks.go)
		result, err = s.callTask(sendCtx, id, tc, callParams{params, meta})
	} else {
		result, err = s.send(sendCtx, id, string(mcp.MethodToolsCall), callParams{params, meta})
	}
	if s.stopping.Err() != nil {
		// Checked once more after the answer: the child may answer the
		// stop itself (its stdin is closed right after stopping ends), and
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

// start opens a new session on the child: it starts the process or
// connects, runs initialize and reads the catalog, all within the startup
// timeout.
func (c *Server) start(ctx context.Context) (*Session, *catalog.ChildCatalog, error) {
	sctx, cancel := context.WithTimeout(ctx, c.cfg.StartupTimeout)
	defer cancel()
	var sess *Session
	var err error
	if c.cfg.URL != "" {
		sess, err = c.connect()
	} else {
		sess, err = c.spawn(sctx)
	}
	if err != nil {
		return nil, nil, link.StepFailure(link.ReasonStartFailed, fmt.Errorf("server %s: %w", c.alias, err))
	}
	opts := []client.ClientOption{client.WithProtocolVersion(childProtocolVersion)}
	bidi, relays := sess.tr.(transport.BidirectionalInterface)
	if relays {
		// What mcpmux can pass on to the clients (the root's childrequests.go). The
		// legacy SSE transport cannot carry a child's requests at all.
		opts = append(opts, client.WithClientCapabilities(relayedCapabilities()))
	}
	sess.client = client.NewClient(sess.tr, opts...)
	// The transport keeps this context for requests the child sends us; it
	// must live as long as the session, not the start-up.
	if err := sess.client.Start(context.WithoutCancel(ctx)); err != nil {
		c.abort(sess)
		return nil, nil, link.StepFailure(link.ReasonStartFailed, fmt.Errorf("server %s: start: %w", c.alias, err))
	}
	if relays {
		// Replaces the handler Start set: requests are relayed, not answered.
		bidi.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			return c.host.Request(ctx, c, sess, req), nil
		})
	}
	sess.client.OnConnectionLost(func(err error) {
		sess.markLost(link.LostReason(err), "connection lost: "+err.Error())
	})
	sess.client.OnNotification(func(n mcp.JSONRPCNotification) {
		// Runs on the transport's read goroutine: hand off, never block.
		switch n.Method {
		case mcp.MethodNotificationToolsListChanged, mcp.MethodNotificationPromptsListChanged,
			mcp.MethodNotificationResourcesListChanged:
			select {
			case c.refresh <- struct{}{}:
			default:
			}
		case mcp.MethodNotificationResourceUpdated:
			c.host.ResourceUpdated(c, n)
		case string(mcp.MethodNotificationProgress):
			c.host.Progress(sess, n)
		case string(mcp.MethodNotificationMessage):
			c.host.Log(c, sess, n)
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = childProtocolVersion
	init.Params.ClientInfo = c.clientInfo
	ictx, note := link.WithRequestNote(sctx, string(mcp.MethodInitialize))
	res, err := sess.client.Initialize(ictx, init)
	if err != nil {
		if se := note.StatusErr(); se != nil {
			err = se // mcp-go's words for it say less
		}
		err = c.startErr(sctx, sess, err)
		c.abort(sess)
		return nil, nil, link.StepFailure(link.ReasonInitializeFailed, fmt.Errorf("server %s: initialize: %w", c.alias, err))
	}
	sess.caps, sess.instructions = res.Capabilities, res.Instructions
	if sess.caps.Logging != nil {
		c.host.ApplyLogLevel(sctx, c, sess)
	}
	cat, err := c.readCatalog(sctx, sess)
	if err != nil {
		err = c.startErr(sctx, sess, err)
		c.abort(sess)
		return nil, nil, link.StepFailure(link.ReasonToolsListFailed, fmt.Errorf("server %s: %w", c.alias, err))
	}
	if sess.caps.Resources != nil && sess.caps.Resources.Subscribe {
		c.resubscribe(sctx, sess)
	}
	if c.cfg.URL != "" {
		sess.wg.Go(func() { c.ping(sess) })
	}
	return sess, cat, nil
}

// spawn starts the child process and watches it.
func (c *Server) spawn(ctx context.Context) (*Session, error) {
	proc, err := c.host.Spawn(ctx, childproc.Spec{
		Path: c.cfg.Command,
		Args: c.cfg.Args,
		Env:  c.cfg.Environ(childproc.UserEnviron(c.environ, c.cfg.User)),
		User: c.cfg.User, Group: c.cfg.Group,
	})
	if err != nil {
		return nil, err
	}
	limit := c.limits.MaxMessageBytes
	sess := newSession(limit)
	sess.proc = proc
	lines := link.NewLineReader(proc.Stdout, limit, sess.eof, c.log.With().Int("pid", proc.Pid()).Logger())
	sess.stdin = &childStdin{WriteCloser: proc.Stdin}
	sess.tr = newChildConn(lines, sess.stdin, &sess.wg, c.log)
	sess.wg.Go(func() { c.logStderr(proc.Stderr, proc.Pid()) })
	// The exit is noticed when it happens, not when the next call fails.
	sess.wg.Go(func() {
		select {
		case <-proc.Done():
		case <-sess.eof:
			// Usually the exit follows at once; a child that stays alive
			// without its stdout, or that broke the protocol, is useless.
			t := time.NewTimer(drainGrace)
			select {
			case <-proc.Done():
			case <-t.C:
				sess.markLost(link.ReasonProtocolBroken, "its stdout ended or broke the protocol")
				proc.Kill()
			}
			t.Stop()
		}
		<-proc.Done()
		sess.markLost(link.ReasonExited, exitReason(proc.ExitErr()))
	})
	return sess, nil
}

// connect prepares the transport to a remote child; requests make the
// connection.
func (c *Server) connect() (*Session, error) {
	sess := newSession(c.limits.MaxMessageBytes)
	var err error
	// Every response body, and every event of a stream, is bounded.
	hc := link.LimitedClient(c.limits.MaxMessageBytes, c.log)
	switch c.cfg.Transport {
	case "sse":
		sess.sse = true
		sess.tr, err = transport.NewSSE(c.cfg.URL, transport.WithHeaders(c.cfg.Headers), transport.WithHTTPClient(hc),
			transport.WithSSELogger(liblog.Slog(c.log)),
			// The call's own deadline decides; the transport's default timer
			// would fire first and look like a dead server.
			transport.WithResponseTimeout(2*c.callTimeout+time.Minute))
	default:
		sess.tr, err = transport.NewStreamableHTTP(c.cfg.URL, transport.WithHTTPHeaders(c.cfg.Headers), transport.WithHTTPBasicClient(hc),
			transport.WithHTTPLogger(liblog.Slog(c.log)),
			// The standalone stream carries what the server says outside a
			// request, such as tools/list_changed.
			transport.WithContinuousListening())
	}
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// ping checks a remote child every PingInterval; missedPings failures in a
// row mark the session lost.
func (c *Server) ping(sess *Session) {
	t := time.NewTicker(c.cfg.PingInterval)
	defer t.Stop()
	misses := 0
	for {
		select {
		case <-sess.closing:
			return
		case <-sess.lost:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.PingInterval)
		err := sess.client.Ping(ctx)
		cancel()
		if err == nil {
			misses = 0
			continue
		}
		misses++
		c.log.Warn().Err(err).Int("missed", misses).Msg("ping failed")
		if misses >= missedPings {
			sess.markLost(link.ReasonPingsFailed, fmt.Sprintf("%d pings in a row failed", misses))
			return
		}
	}
}

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// startErr explains a failed start-up step in the terms an operator needs.
func (c *Server) startErr(ctx context.Context, sess *Session, err error) error {
	if sess.proc != nil && sess.Failed(ctx, err) {
		as := sess.lostAs
		if as == link.ReasonTimedOut { // the start-up's own time ran out
			as = link.NotReadyWithin(c.cfg.StartupTimeout)
		}
		return link.Failure(as, fmt.Errorf("process %s", sess.lostWhy))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return link.Failure(link.NotReadyWithin(c.cfg.StartupTimeout), fmt.Errorf("no answer within %s", c.cfg.StartupTimeout))
	}
	return err
}

// abort ends a session that never became ready.
func (c *Server) abort(sess *Session) {
	if sess.proc != nil {
		sess.proc.Kill()
	}
	c.teardown(sess)
}

// stopSession ends a healthy session gracefully, as on shutdown. The
// session is lost from the start, and the calls still in flight on it
// are cut (CallTool): they fail as calls the child went away under.
func (c *Server) stopSession(sess *Session) {
	sess.markLost(link.ReasonError, errStopped.Error())
	sess.stop()
	if sess.proc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), childproc.StdinGrace+childproc.SigtermGrace+time.Second)
		defer cancel()
		// Closed here, before Stop closes the pipe itself, so that what
		// mcp-go still writes is known to be for a child being stopped.
		_ = sess.stdin.Close()
		sess.proc.Stop(ctx)
	}
	c.teardown(sess)
}

// teardown releases what a session holds and waits for its goroutines. A
// child process has exited or been killed by now; its stdout is read until
// it ends (or drainGrace), so that an answer written just before the exit
// still reaches its caller.
func (c *Server) teardown(sess *Session) {
	sess.markLost(link.ReasonError, "closed by mcpmux")
	close(sess.closing)
	if sess.proc != nil {
		<-sess.proc.Done()
		t := time.NewTimer(drainGrace)
		select {
		case <-sess.eof:
		case <-t.C:
		}
		t.Stop()
	}
	if sess.tr != nil {
		_ = sess.tr.Close()
	}
	if sess.proc != nil {
		_ = sess.proc.Stdout.Close()
		_ = sess.proc.Stderr.Close()
	}
	sess.wg.Wait()
}

// childStdin is a stdio child's stdin as mcp-go writes to it. Once mcpmux
// has closed it (to stop the child, or after the session ended), a write
// that finds it closed is dropped and reported done: nothing written after
// the end of its stdin can reach the child, which is how a child is told
// to stop, not a failure to log (mcp-go logs a failed write of its answer
// to a request the child sent as an error, and a child may well ask
// something while it is being stopped: server-everything asks for
// roots/list a moment after initialize).
type childStdin struct {
	io.WriteCloser
	closed atomic.Bool
}

// Write writes p to the child, or drops it once the pipe is closed.
func (s *childStdin) Write(p []byte) (int, error) {
	n, err := s.WriteCloser.Write(p)
	if err != nil && s.closed.Load() && errors.Is(err, os.ErrClosed) {
		return len(p), nil
	}
	return n, err
}

// Close closes the pipe; later writes are dropped.
func (s *childStdin) Close() error {
	s.closed.Store(true)
	return s.WriteCloser.Close()
}

// maxStderrLine is the most of one stderr line that is logged; the rest is
// dropped, but still read, so that the child never blocks on a full pipe.
const maxStderrLine = 16 * 1024

// logStderr logs the child's stderr line by line until it ends.
func (c *Server) logStderr(r io.Reader, pid int) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		truncated := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			ev := c.log.Info().Int("pid", pid).Str("stderr", strings.TrimRight(string(line), "\r\n"))
			if truncated {
				ev = ev.Bool("truncated", true)
			}
			ev.Msg("server stderr")
		}
		for errors.Is(err, bufio.ErrBufferFull) { // skip the rest of a long line
			_, err = br.ReadSlice('\n')
		}
		if err != nil {
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
