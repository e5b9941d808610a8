package testsupport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// upstreamHead is what NewLab writes to open the [upstream] table.
const upstreamHead = "[upstream]\nidentity = \"reader\"\n"

// AddUpstream appends raw TOML to the config's [upstream] table: keys such
// as listen = "127.0.0.1:0", then sub-tables ([[upstream.tokens]],
// [upstream.jwt]). It goes before the [servers] tables.
func (l *Lab) AddUpstream(t testing.TB, toml string) {
	t.Helper()
	b, err := os.ReadFile(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, upstreamHead) {
		t.Fatalf("%s has no %q to add to", l.Config, upstreamHead)
	}
	s = strings.Replace(s, upstreamHead, upstreamHead+strings.TrimSpace(toml)+"\n", 1)
	l.upstream = toml
	if err := os.WriteFile(l.Config, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// HTTPStart says how StartHTTPMux runs mcpmux.
type HTTPStart struct {
	// Args follow `serve --config lab.Config`.
	Args []string
	// Env is added to mcpmux's environment, as KEY=VALUE.
	Env []string
	// Listeners is how many "serving HTTP" log lines to wait for: 2 with
	// admin_listen. Default 1.
	Listeners int
	// Stdio connects an MCP client (protocol 2025-11-25) to mcpmux's stdio,
	// for a config or arguments that serve it (say --stdio).
	Stdio bool
}

// HTTPMux is a running `mcpmux serve` that serves HTTP.
type HTTPMux struct {
	Cmd *exec.Cmd
	Log *LogTap
	// Addrs are the addresses mcpmux reported serving, in the order it
	// logged them: listen first, then admin_listen.
	Addrs []string
	// Stdio is the client on mcpmux's stdio, with HTTPStart.Stdio.
	Stdio *Conn

	t      testing.TB
	stdin  io.WriteCloser
	exited chan struct{}
	err    error
}

// StartHTTPMux starts `mcpmux serve --config lab.Config` and waits until it
// logs the addresses it serves HTTP on. At cleanup the process is stopped
// with SIGTERM, and the test fails if any child it started outlives it.
func StartHTTPMux(t testing.TB, lab *Lab, o HTTPStart) *HTTPMux {
	t.Helper()
	bin, _ := Binaries(t)
	cmd := exec.Command(bin, append([]string{"serve", "--config", lab.Config}, o.Args...)...)
	cmd.Env = append(os.Environ(), o.Env...)
	h := &HTTPMux{Cmd: cmd, t: t, exited: make(chan struct{})}
	var stdout io.Reader
	if o.Stdio {
		var err error
		if h.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if stdout, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.Log = newLogTap(stderr)
	go func() {
		<-h.Log.done // stderr ends when mcpmux exits
		h.err = cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		_ = h.Stop()
		for _, pid := range h.Log.ChildPids() {
			if Alive(pid) {
				t.Errorf("child pid %d outlived mcpmux", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	n := max(o.Listeners, 1)
	seen := 0
	h.Log.WaitLine(t, fmt.Sprintf("%d \"serving HTTP\" lines", n), func(l map[string]any) bool {
		if l["message"] != "serving HTTP" {
			return false
		}
		h.Addrs = append(h.Addrs, fmt.Sprint(l["addr"]))
		seen++
		return seen == n
	})

	if o.Stdio {
		h.Stdio = connect(t, client.NewClient(transport.NewIO(stdout, h.stdin, nil),
			client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)), mcp.LATEST_LEGACY_PROTOCOL_VERSION, h.Log)
	}
	return h
}

// HostPort returns Addrs[i] as a client on this machine reaches it: an
// unspecified host (0.0.0.0, ::) becomes 127.0.0.1.
func (h *HTTPMux) HostPort(i int) string {
	host, port, err := net.SplitHostPort(h.Addrs[i])
	if err != nil {
		h.t.Fatalf("address %q: %v", h.Addrs[i], err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// Base returns "http://" + HostPort(i).
func (h *HTTPMux) Base(i int) string { return "http://" + h.HostPort(i) }

// URL is the MCP endpoint at the default path: Base(0) + "/mcp".
func (h *HTTPMux) URL() string { return h.Base(0) + "/mcp" }

// Signal sends sig to mcpmux.
func (h *HTTPMux) Signal(sig syscall.Signal) {
	h.t.Helper()
	if err := h.Cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Exited is closed once mcpmux has exited.
func (h *HTTPMux) Exited() <-chan struct{} { return h.exited }

// ExitErr is how mcpmux exited; valid after Exited.
func (h *HTTPMux) ExitErr() error { return h.err }

// WaitExit waits for mcpmux to exit, failing the test after Wait, and
// returns how it exited.
func (h *HTTPMux) WaitExit() error {
	h.t.Helper()
	select {
	case <-h.exited:
		return h.err
	case <-time.After(Wait):
		_ = h.Cmd.Process.Signal(syscall.SIGQUIT) // the runtime prints every goroutine
		<-h.exited
		h.t.Fatalf("mcpmux did not exit; log:\n%s", h.Log.Text())
		return nil
	}
}

// Stop sends SIGTERM (and closes stdin, if it is a pipe) and waits for
// mcpmux to exit.
func (h *HTTPMux) Stop() error {
	select {
	case <-h.exited:
		return h.err
	default:
	}
	_ = h.Cmd.Process.Signal(syscall.SIGTERM)
	if h.stdin != nil {
		_ = h.stdin.Close()
	}
	awaitExit(h.t, h.Cmd, h.exited, h.Log, "after SIGTERM")
	return h.err
}

// Conn is a real MCP client connected to mcpmux, over HTTP or stdio, that
// records the notifications it receives.
type Conn struct {
	Client *client.Client
	// Init is mcpmux's answer to initialize (or, for a 2026-07-28
	// client, to server/discover).
	Init  *mcp.InitializeResult
	t     testing.TB
	log   *LogTap // for failure messages; may be nil
	notes chan mcp.JSONRPCNotification
}

// HTTPClient says how ConnectHTTP connects.
type HTTPClient struct {
	// Token is sent as Authorization: Bearer Token, unless "".
	Token string
	// Headers are sent with every request.
	Headers map[string]string
	// Version pins the protocol version; "" lets the client pick (it
	// prefers 2026-07-28).
	Version string
	// Listen opens the standalone GET stream (and so keeps the connection
	// on protocol 2025-11-25), which carries notifications such as
	// tools/list_changed.
	Listen bool
	// Log is mcpmux's log, shown when connecting fails; may be nil.
	Log *LogTap
	// Options are the client's (e.g. its sampling handler).
	Options []client.ClientOption
	// HeaderFunc adds headers of each request's own (its trace context,
	// say); nil for none.
	HeaderFunc transport.HTTPHeaderFunc
}

// ConnectHTTP connects an mcp-go streamable HTTP client to url and
// initializes it, failing the test if that fails. It is closed at cleanup.
func ConnectHTTP(t testing.TB, url string, o HTTPClient) *Conn {
	t.Helper()
	c, err := ConnectHTTPErr(t, url, o)
	if err != nil {
		if o.Log != nil {
			t.Fatalf("connect %s: %v\nlog:\n%s", url, err, o.Log.Text())
		}
		t.Fatalf("connect %s: %v", url, err)
	}
	return c
}

// ConnectHTTPErr is ConnectHTTP returning the error of the handshake.
func ConnectHTTPErr(t testing.TB, url string, o HTTPClient) (*Conn, error) {
	t.Helper()
	headers := map[string]string{}
	for k, v := range o.Headers {
		headers[k] = v
	}
	if o.Token != "" {
		headers["Authorization"] = "Bearer " + o.Token
	}
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(headers)}
	if o.Listen {
		opts = append(opts, transport.WithContinuousListening())
	}
	if o.HeaderFunc != nil {
		opts = append(opts, transport.WithHTTPHeaderFunc(o.HeaderFunc))
	}
	tr, err := transport.NewStreamableHTTP(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	copts := slices.Clone(o.Options)
	if o.Version != "" {
		copts = append(copts, client.WithProtocolVersion(o.Version))
	}
	return connectErr(t, client.NewClient(tr, copts...), o.Version, o.Log)
}

func connect(t testing.TB, c *client.Client, version string, log *LogTap) *Conn {
	t.Helper()
	conn, err := connectErr(t, c, version, log)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return conn
}

func connectErr(t testing.TB, c *client.Client, version string, log *LogTap) (*Conn, error) {
	t.Helper()
	conn := &Conn{Client: c, t: t, log: log, notes: make(chan mcp.JSONRPCNotification, 64)}
	// Start's context lives as long as the client: it ends the GET stream.
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case conn.notes <- n:
		default:
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpmux-http-test", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		return nil, err
	}
	conn.Init = res
	return conn, nil
}

// ProtocolVersion is the protocol version the client negotiated.
func (c *Conn) ProtocolVersion() string { return c.Client.ProtocolVersion() }

// Call calls a tool with a bound of Wait.
func (c *Conn) Call(name string, args any) (*mcp.CallToolResult, error) {
	return c.CallCtx(context.Background(), name, args)
}

// CallCtx is Call under ctx (and still the bound of Wait).
func (c *Conn) CallCtx(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	return callTool(ctx, c.Client, name, args)
}

// MustCall calls a tool and fails the test on a protocol or transport
// error.
func (c *Conn) MustCall(name string, args any) *mcp.CallToolResult {
	c.t.Helper()
	res, err := c.Call(name, args)
	if err != nil {
		c.t.Fatalf("call %s: %v%s", name, err, c.logText())
	}
	return res
}

// ToolNames lists the tools mcpmux shows this client, in order, following
// cursors.
func (c *Conn) ToolNames() []string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	var names []string
	req := mcp.ListToolsRequest{}
	for page := 1; ; page++ {
		res, err := c.Client.ListTools(ctx, req)
		if err != nil {
			c.t.Fatalf("tools/list: %v%s", err, c.logText())
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == "" {
			return names
		}
		if page > 100 {
			c.t.Fatal("tools/list does not end")
		}
		req.Params.Cursor = res.NextCursor
	}
}

// Ping makes one round trip.
func (c *Conn) Ping() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := c.Client.Ping(ctx); err != nil {
		c.t.Fatalf("ping: %v%s", err, c.logText())
	}
}

// Notification waits for a notification with the given method, skipping
// others.
func (c *Conn) Notification(method string) mcp.JSONRPCNotification {
	c.t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case n := <-c.notes:
			if n.Method == method {
				return n
			}
		case <-timeout:
			c.t.Fatalf("no %s notification%s", method, c.logText())
		}
	}
}

// Await waits up to d for a notification with the given method, skipping
// others, and reports whether one came.
func (c *Conn) Await(method string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case n := <-c.notes:
			if n.Method == method {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// Pending returns, without waiting, the notifications with the given
// method received and not yet taken.
func (c *Conn) Pending(method string) []mcp.JSONRPCNotification {
	var out []mcp.JSONRPCNotification
	for {
		select {
		case n := <-c.notes:
			if n.Method == method {
				out = append(out, n)
			}
		default:
			return out
		}
	}
}

// DrainNotifications forgets notifications received so far.
func (c *Conn) DrainNotifications() { c.Pending("") }

func (c *Conn) logText() string {
	if c.log == nil {
		return ""
	}
	return "\nlog:\n" + c.log.Text()
}

// Refused reports whether a new TCP connection to addr is refused.
func Refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// Trickled is what Trickle saw.
type Trickled struct {
	Resp *http.Response
	Body string // the answer's body
	// Closed says the server ended the connection after its answer (an
	// end of stream or a reset) before Wait passed; Sent is how many of
	// the trickle's bytes it had been sent by then.
	Closed bool
	Sent   int
}

// Trickle is a slow client over a raw TCP connection to hostport: it writes
// head (a request's start line and header fields, through the blank line)
// and first at once, then one more byte of the body every interval, n in
// all, as long as the server takes them. It reads the answer as it comes
// and then waits, at most Wait, for the server to end the connection. The
// interval is the client's pace, not a wait for anything: whatever the
// server does, Trickle returns within Wait.
func Trickle(t testing.TB, hostport, head string, first []byte, n int, interval time.Duration) Trickled {
	t.Helper()
	conn, err := net.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(Wait))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(first); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for range n {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
			sent.Add(1)
		}
	})
	defer func() {
		close(stop)
		writer.Wait()
	}()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_, err = io.Copy(io.Discard, br)
	var ne net.Error
	closed := !errors.As(err, &ne) || !ne.Timeout()
	return Trickled{Resp: resp, Body: string(b), Closed: closed, Sent: int(sent.Load())}
}
