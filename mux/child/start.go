package child

// A session's start and end: the process spawned or the remote server
// connected to, the handshake and the first read of its lists, and the
// teardown.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/mux/child/link"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

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
			transport.WithHeaderFunc(telemetry.Headers), // a request's trace context, on its POST
			transport.WithSSELogger(liblog.Slog(c.log)),
			// The call's own deadline decides; the transport's default timer
			// would fire first and look like a dead server.
			transport.WithResponseTimeout(2*c.callTimeout+time.Minute))
	default:
		sess.tr, err = transport.NewStreamableHTTP(c.cfg.URL, transport.WithHTTPHeaders(c.cfg.Headers), transport.WithHTTPBasicClient(hc),
			transport.WithHTTPHeaderFunc(telemetry.Headers), // a request's trace context
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
