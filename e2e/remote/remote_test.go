package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Remote children: a labserver serving MCP over HTTP in a process the test
// starts, kills and starts again on the same address; mcpmux reaches it at
// its URL. The tests spend most of their time waiting, so they run in
// parallel, except the two that set environment variables.

// tickets is a stdio labserver to run next to the remote one.
var tickets = ts.Server{Alias: "tickets", ReadOnly: []string{"search"}}

type remoteAnswer struct {
	text    string
	isError bool
	err     error
	at      time.Time
}

// callAsync calls a tool in the background; the answer comes on the channel.
func callAsync(m *ts.Mux, name string, args map[string]any) <-chan remoteAnswer {
	done := make(chan remoteAnswer, 1)
	go func() {
		res, err := m.Call(name, args)
		if err != nil {
			done <- remoteAnswer{err: err, at: time.Now()}
			return
		}
		done <- remoteAnswer{text: ts.Text(res), isError: res.IsError, at: time.Now()}
	}()
	return done
}

func waitAnswer(t *testing.T, done <-chan remoteAnswer, what string) remoteAnswer {
	t.Helper()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a
	case <-time.After(ts.Wait + 5*time.Second):
		t.Fatalf("%s: no answer", what)
		return remoteAnswer{}
	}
}

// headerProxy forwards to target and records the headers of every request.
type headerProxy struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHeaderProxy(t *testing.T, target string) *headerProxy {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	p := &headerProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Clone())
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *headerProxy) headers() []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]http.Header(nil), p.seen...)
}

// A remote child over streamable HTTP is listed and called next to a stdio
// child, and its headers, ${VAR} expanded from mcpmux's environment, go with
// every request.
func TestRemoteStreamableListedAndCalled(t *testing.T) {
	t.Setenv("MCPMUX_E2E_REMOTE_TOKEN", "s3cret")
	t.Setenv("MCPMUX_E2E_REMOTE_TAG", "tag-1")
	lab := ts.NewLab(t, `call_timeout = "30s"`, tickets)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	r := ts.StartRemote(t, lab, "docs", "")
	proxy := newHeaderProxy(t, r.Addr)
	lab.AddRemote(t, ts.RemoteServer{
		Alias: "docs", URL: proxy.srv.URL + "/mcp", ReadOnly: ts.RemoteReadOnly,
		Headers: map[string]string{
			"Authorization": "Bearer ${MCPMUX_E2E_REMOTE_TOKEN}",
			"X-Test":        "${MCPMUX_E2E_REMOTE_TAG}",
		},
	})
	m := ts.StartMux(t, lab)

	names := m.ToolNames()
	for _, want := range []string{"docs__search", "docs__slow", "docs__append_note", "tickets__search"} {
		if !ts.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs__search: %q", got)
	}
	if got := ts.Text(m.MustCall("tickets__search", map[string]any{"query": "public"})); got != "tickets: public evidence" {
		t.Errorf("tickets__search: %q", got)
	}
	// The answer came from the process the test started, not a child of mcpmux.
	if got := ts.ChildPid(t, m, "docs"); got != r.Pid() {
		t.Errorf("docs__whoami = %d, want the remote labserver's pid %d", got, r.Pid())
	}
	res := m.MustCall("docs__search", map[string]any{"query": "private"})
	if !res.IsError || !strings.Contains(ts.Text(res), "denies private data") {
		t.Errorf("docs__search private: isError=%v %q", res.IsError, ts.Text(res))
	}
	line := m.Log.WaitLine(t, "docs ready", ts.Msg("server ready", "server", "docs"))
	if _, ok := line["pid"]; ok {
		t.Errorf("a remote child was logged with a pid: %v", line)
	}
	ts.Audit(m, t, "docs__search", "allowed")

	seen := proxy.headers()
	if len(seen) < 3 {
		t.Fatalf("the proxy saw %d requests, want initialize, tools/list and calls", len(seen))
	}
	for i, h := range seen {
		if got := h.Get("Authorization"); got != "Bearer s3cret" {
			t.Errorf("request %d: Authorization = %q", i, got)
		}
		if got := h.Get("X-Test"); got != "tag-1" {
			t.Errorf("request %d: X-Test = %q", i, got)
		}
	}
	if strings.Contains(m.Log.Text(), "s3cret") {
		t.Error("the header value was logged")
	}
}

// The same over the legacy SSE transport, including a list_changed that the
// remote child sends on its event stream.
func TestRemoteSSEListedAndCalled(t *testing.T) {
	t.Setenv("MCPMUX_E2E_REMOTE_TAG", "tag-2")
	lab, r := ts.RemoteLab(t, "sse", `headers = { X-Test = "${MCPMUX_E2E_REMOTE_TAG}" }`, tickets)
	m := ts.StartMux(t, lab)

	names := m.ToolNames()
	if !ts.Contains(names, "docs__search") || !ts.Contains(names, "tickets__search") {
		t.Fatalf("tools/list: %v", names)
	}
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs__search: %q", got)
	}
	if got := ts.Text(m.MustCall("docs__echo", map[string]any{"message": "hi"})); got != "docs: hi" {
		t.Errorf("docs__echo: %q", got)
	}
	if got := ts.ChildPid(t, m, "docs"); got != r.Pid() {
		t.Errorf("docs__whoami = %d, want %d", got, r.Pid())
	}

	m.DrainNotifications()
	if got := ts.Text(m.MustCall("docs__notify_changed", nil)); got != "extra on" {
		t.Fatalf("notify_changed: %q", got)
	}
	m.WaitTools("has docs__extra", func(n []string) bool { return ts.Contains(n, "docs__extra") })
	if got := ts.Text(m.MustCall("docs__extra", nil)); got != "docs: extra" {
		t.Errorf("docs__extra: %q", got)
	}
}

// remoteKillMux bounds the calls of the kill tests well under the default
// ping interval (15s, three misses to be marked lost): the connection's end
// must be noticed from the connection itself.
const remoteKillMux = `call_timeout = "6s"`

// A remote child killed while a read-only call is in flight, and started
// again on the same address: the call is re-run once on the new session,
// and the caller gets the retry's answer.
func TestRemoteKilledDuringReadOnlyCallIsRetried(t *testing.T) {
	t.Parallel()
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			lab, r := ts.RemoteLabMux(t, remoteKillMux, transport, `startup_timeout = "10s"`)
			m := ts.StartMux(t, lab)
			before := r.Pid()

			done := callAsync(m, "docs__slow", map[string]any{"ms": 1000, "tag": "remote-ro"})
			lab.WaitStarted(t, "remote-ro")
			if err := os.Remove(filepath.Join(lab.Started, "remote-ro")); err != nil {
				t.Fatal(err)
			}
			r.Kill()
			r.Restart()

			got := waitAnswer(t, done, "docs__slow")
			if got.isError || got.text != "slept 1000 tag=remote-ro" {
				t.Fatalf("after the restart: isError=%v text=%q\nlog:\n%s", got.isError, got.text, m.Log.Text())
			}
			if _, err := os.Stat(filepath.Join(lab.Started, "remote-ro")); err != nil {
				t.Errorf("the retry did not reach the restarted server: %v", err)
			}
			m.Log.WaitLine(t, "retried audit", ts.Msg("call", "tool", "docs__slow", "outcome", "retried"))
			m.Log.WaitLine(t, "retry warning", ts.Msg("server went away before answering; retrying once on its next session", "server", "docs", "tool", "docs__slow"))
			if after := ts.ChildPid(t, m, "docs"); after != r.Pid() || after == before {
				t.Errorf("docs__whoami = %d after the restart; old pid %d, new %d", after, before, r.Pid())
			}
		})
	}
}

// A write in flight when the remote child dies is not replayed on the new
// session: it ran once, and the caller is told, at once, that it may or may
// not have taken effect.
func TestRemoteKilledDuringWriteIsNotReplayed(t *testing.T) {
	t.Parallel()
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			lab, r := ts.RemoteLabMux(t, remoteKillMux, transport, `startup_timeout = "10s"`)
			m := ts.StartMux(t, lab)

			done := callAsync(m, "docs__append_note", map[string]any{"text": "one", "delay_ms": 60000})
			ts.WaitFor(t, "the write's side effect", func() bool { return lab.NotesOf(t, "docs") == "one\n" })
			killed := time.Now()
			r.Kill()
			r.Restart()

			got := waitAnswer(t, done, "docs__append_note")
			if !got.isError || !strings.Contains(got.text, "may or may not have taken effect") || !strings.Contains(got.text, "not retried") {
				t.Fatalf("%s after the kill: isError=%v text=%q", got.at.Sub(killed), got.isError, got.text)
			}
			if took := got.at.Sub(killed); took > 3*time.Second {
				t.Errorf("the answer came %s after the kill", took)
			}
			m.Log.WaitLine(t, "interrupted audit", ts.Msg("call", "tool", "docs__append_note", "outcome", "interrupted"))
			if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
				t.Errorf("after the restart: %q", got)
			}
			if got := ts.ChildPid(t, m, "docs"); got != r.Pid() {
				t.Errorf("docs__whoami = %d, want the new server's pid %d", got, r.Pid())
			}
			if notes := lab.NotesOf(t, "docs"); notes != "one\n" {
				t.Errorf("notes = %q, want exactly one write", notes)
			}
		})
	}
}

// A remote child that stops answering pings is marked lost with no call
// made; its tools are withdrawn after the startup timeout, and come back
// when it does.
func TestRemotePingMarksLostAndToolsWithdrawn(t *testing.T) {
	t.Parallel()
	lab, r := ts.RemoteLab(t, "", `ping_interval = "200ms"`+"\n"+`startup_timeout = "1s"`, tickets)
	m := ts.StartMux(t, lab)
	if names := m.ToolNames(); !ts.Contains(names, "docs__search") {
		t.Fatalf("tools/list: %v", names)
	}
	m.DrainNotifications()

	killed := time.Now()
	r.Kill()
	m.Log.WaitLine(t, "a failed ping", ts.Msg("ping failed", "server", "docs"))
	gone := m.Log.WaitLine(t, "the session marked lost", ts.Msg("server went away; restarting", "server", "docs"))
	if took := time.Since(killed); took > 5*time.Second {
		t.Errorf("the lost session was noticed after %s, with pings every 200ms", took)
	}
	why, _ := gone["why"].(string)
	if !strings.Contains(why, "ping") {
		t.Errorf("why = %q, want the missed pings", why)
	}
	if n := len(m.Log.Lines(ts.Msg("ping failed", "server", "docs"))); n < 3 {
		t.Errorf("%d failed pings logged before the session was marked lost, want 3", n)
	}

	names := m.WaitTools("has no docs tools", func(n []string) bool { return !ts.HasPrefix(n, "docs__") })
	if !ts.Contains(names, "tickets__search") {
		t.Errorf("the stdio child's tools went too: %v", names)
	}
	m.Log.WaitLine(t, "withdrawal", ts.Msg("server still not ready: its tools are withdrawn until it is back", "server", "docs"))

	r.Restart()
	m.WaitTools("has docs__search again", func(n []string) bool { return ts.Contains(n, "docs__search") })
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("after the restart: %q", got)
	}
}

// A list_changed from the remote child makes mcpmux read its catalog again
// and tell its own client: here the change comes from the remote server
// itself, while mcpmux has no request of its own in flight there (another
// client of the server calls notify_changed, and the server tells every
// session). Pings, which might carry the notification back late, are off.
// Over streamable HTTP such a notification travels on the session's GET
// stream.
func TestRemoteCatalogReRead(t *testing.T) {
	t.Parallel()
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			lab, r := ts.RemoteLab(t, transport, `ping_interval = "1h"`)
			m := ts.StartMux(t, lab)
			if names := m.ToolNames(); ts.Contains(names, "docs__extra") {
				t.Fatalf("docs__extra listed before notify_changed: %v", names)
			}
			m.DrainNotifications()
			direct := r.Client(t)
			for _, want := range []string{"extra on", "extra off"} {
				req := mcp.CallToolRequest{}
				req.Params.Name = "notify_changed"
				res, err := direct.CallTool(context.Background(), req)
				if err != nil || ts.Text(res) != want {
					t.Fatalf("direct notify_changed: %v %v", err, res)
				}
				on := want == "extra on"
				m.WaitToolsWithin(3*time.Second, "has docs__extra: "+strconv.FormatBool(on), func(n []string) bool {
					return ts.Contains(n, "docs__extra") == on
				})
			}
		})
	}
}

// The remote server restarts between two calls, so its new process answers
// the old session id with 404: mcpmux starts a new session, and the
// read-only call that ran into the 404 is retried on it and succeeds.
func TestRemoteRestartBetweenCallsReadOnly(t *testing.T) {
	t.Parallel()
	lab, r := ts.RemoteLab(t, "", `startup_timeout = "10s"`)
	m := ts.StartMux(t, lab)
	before := ts.ChildPid(t, m, "docs")

	r.Kill()
	r.Restart()
	res := m.MustCall("docs__search", map[string]any{"query": "public"})
	if res.IsError || ts.Text(res) != "docs: public evidence" {
		t.Fatalf("after the restart: isError=%v %q\nlog:\n%s", res.IsError, ts.Text(res), m.Log.Text())
	}
	m.Log.WaitLine(t, "retried audit", ts.Msg("call", "tool", "docs__search", "outcome", "retried"))
	gone := m.Log.WaitLine(t, "the old session marked lost", ts.Msg("server went away; restarting", "server", "docs"))
	if why, _ := gone["why"].(string); !strings.Contains(why, "404") {
		t.Errorf("why = %q, want the 404 on the old session", why)
	}
	if after := ts.ChildPid(t, m, "docs"); after == before || after != r.Pid() {
		t.Errorf("docs__whoami = %d; old pid %d, new %d", after, before, r.Pid())
	}
}

// A write that provably never reached the remote server, because the
// connection was refused or the server answered the old session id with
// 404, is not a call that "may or may not have taken effect": nothing ran.
// mcpmux should send it on the next session (or answer that it was not
// sent), not tell the model it may have happened.
func TestRemoteWriteNeverDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		restart bool // before the call: 404 on the old session; else connection refused
	}{
		{"404 after a restart", true},
		{"connection refused", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lab, r := ts.RemoteLab(t, "", `startup_timeout = "1s"`)
			m := ts.StartMux(t, lab)
			before := ts.ChildPid(t, m, "docs")

			r.Kill()
			if tc.restart {
				r.Restart()
			}
			res := m.MustCall("docs__append_note", map[string]any{"text": "after"})
			notes := lab.NotesOf(t, "docs")
			if res.IsError && strings.Contains(ts.Text(res), "may or may not have taken effect") {
				t.Errorf("the write never reached the server (notes = %q), yet the answer is %q", notes, ts.Text(res))
			}
			if tc.restart && (res.IsError || ts.Text(res) != "noted" || notes != "after\n") {
				t.Errorf("a write after the server restarted: isError=%v %q, notes %q; want it sent once on the new session", res.IsError, ts.Text(res), notes)
			}
			if !tc.restart && notes != "" {
				t.Errorf("notes = %q while the server was down", notes)
			}

			if !tc.restart {
				r.Restart()
			}
			// Its tools may have been withdrawn meanwhile; they come back
			// once it is reached again.
			ts.WaitFor(t, "docs__search to be listed again", func() bool { return ts.Contains(m.ToolNames(), "docs__search") })
			if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
				t.Errorf("then: %q", got)
			}
			if after := ts.ChildPid(t, m, "docs"); after == before {
				t.Errorf("docs__whoami = %d, unchanged", after)
			}
		})
	}
}

// A call that runs into call_timeout on a remote child is a timeout: the
// server is told to cancel it (the labserver logs "slow <tag> cancelled"),
// the answer says so, and the session, which is fine, is kept.
func TestRemoteCallTimeoutCancelsTheRemoteCall(t *testing.T) {
	t.Parallel()
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			lab, r := ts.RemoteLabMux(t, `call_timeout = "1s"`, transport, "")
			m := ts.StartMux(t, lab)

			res := m.MustCall("docs__slow", map[string]any{"ms": 5000, "tag": "cancel-me"})
			answered := time.Now()
			if !res.IsError || !strings.Contains(ts.Text(res), "timed out after 1s") || !strings.Contains(ts.Text(res), "told to cancel it") {
				t.Errorf("answer: isError=%v %q", res.IsError, ts.Text(res))
			}
			m.Log.WaitLine(t, "timeout audit", ts.Msg("call", "tool", "docs__slow", "outcome", "timeout"))
			// The slow call would end by itself 4s from now: a cancellation
			// shows well before.
			for !strings.Contains(r.Output(), "slow cancel-me cancelled") {
				if time.Since(answered) > 2*time.Second {
					t.Errorf("the remote server never saw the call cancelled; its output:\n%s", r.Output())
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
				t.Errorf("then: %q", got)
			}
			if lines := ts.WentAway(m); len(lines) > 0 {
				t.Errorf("a call timeout cost the healthy session: %v", lines)
			}
		})
	}
}

// The caller's token authenticates the caller to mcpmux and goes no
// further: a remote child sees only the headers its own config gives it.
func TestRemoteNeverSeesTheCallersToken(t *testing.T) {
	t.Parallel()
	const callerToken = "caller-token-must-not-travel"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(callerToken)), tickets)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	r := ts.StartRemote(t, lab, "docs", "")
	proxy := newHeaderProxy(t, r.Addr)
	lab.AddRemote(t, ts.RemoteServer{Alias: "docs", URL: proxy.srv.URL + "/mcp", ReadOnly: ts.RemoteReadOnly})
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: callerToken, Log: h.Log})
	if got := ts.Text(conn.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Fatalf("docs__search: %q", got)
	}
	seen := proxy.headers()
	if len(seen) == 0 {
		t.Fatal("the remote child saw no request")
	}
	for i, hdr := range seen {
		for name, values := range hdr {
			for _, v := range values {
				if strings.Contains(v, callerToken) {
					t.Errorf("request %d to the child carries the caller's token in %s", i, name)
				}
			}
		}
	}
}
