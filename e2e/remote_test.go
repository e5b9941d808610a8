package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// remoteReadOnly names the labserver tools that are safe to re-run.
var remoteReadOnly = []string{"search", "slow", "whoami", "echo", "extra"}

// remoteLab starts a remote labserver "docs" over transport and writes a
// config with it and a stdio labserver "tickets" next to it. extra is raw
// TOML for the docs table.
func remoteLab(t *testing.T, transport, extra string) (*ts.Lab, *ts.Remote) {
	t.Helper()
	return remoteLabMux(t, `call_timeout = "30s"`, transport, extra)
}

// remoteLabMux is remoteLab with the given [mux] lines.
func remoteLabMux(t *testing.T, muxLines, transport, extra string) (*ts.Lab, *ts.Remote) {
	t.Helper()
	lab := ts.NewLab(t, muxLines, ts.Server{Alias: "tickets", ReadOnly: []string{"search"}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	r := ts.StartRemote(t, lab, "docs", transport)
	lab.AddRemote(t, ts.RemoteServer{
		Alias: "docs", URL: r.URL(), Transport: transport, ReadOnly: remoteReadOnly, Extra: extra,
	})
	return lab, r
}

type remoteAnswer struct {
	text    string
	isError bool
	err     error
}

// callAsync calls a tool in the background; the answer comes on the channel.
func callAsync(m *ts.Mux, name string, args map[string]any) <-chan remoteAnswer {
	done := make(chan remoteAnswer, 1)
	go func() {
		res, err := m.Call(name, args)
		if err != nil {
			done <- remoteAnswer{err: err}
			return
		}
		done <- remoteAnswer{text: ts.Text(res), isError: res.IsError}
	}()
	return done
}

func wait(t *testing.T, done <-chan remoteAnswer, what string) remoteAnswer {
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

func hasPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
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
	lab := ts.NewLab(t, `call_timeout = "30s"`, ts.Server{Alias: "tickets", ReadOnly: []string{"search"}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	r := ts.StartRemote(t, lab, "docs", "")
	proxy := newHeaderProxy(t, r.Addr)
	lab.AddRemote(t, ts.RemoteServer{
		Alias: "docs", URL: proxy.srv.URL + "/mcp", ReadOnly: remoteReadOnly,
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
	if got := childPid(t, m, "docs"); got != r.Pid() {
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
	audit(m, t, "docs__search", "allowed")

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
	lab, r := remoteLab(t, "sse", `headers = { X-Test = "${MCPMUX_E2E_REMOTE_TAG}" }`)
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
	if got := childPid(t, m, "docs"); got != r.Pid() {
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

// remoteTransports are the two ways to reach a remote child. A call's
// answer is bounded by call_timeout, well under the default ping interval
// (15s), so a lost connection must be noticed from the connection itself.
var remoteTransports = []string{"streamable", "sse"}

const remoteKillMux = `call_timeout = "8s"`

// A remote child killed while a read-only call is in flight, and started
// again on the same address: the call is re-run once on the new session,
// and the caller gets the retry's answer.
func TestRemoteKilledDuringReadOnlyCallIsRetried(t *testing.T) {
	for _, transport := range remoteTransports {
		t.Run(transport, func(t *testing.T) {
			lab, r := remoteLabMux(t, remoteKillMux, transport, `startup_timeout = "10s"`)
			m := ts.StartMux(t, lab)
			before := r.Pid()

			done := callAsync(m, "docs__slow", map[string]any{"ms": 2000, "tag": "remote-ro"})
			lab.WaitStarted(t, "remote-ro")
			if err := os.Remove(filepath.Join(lab.Started, "remote-ro")); err != nil {
				t.Fatal(err)
			}
			r.Kill()
			r.Restart()

			got := wait(t, done, "docs__slow")
			if got.isError || got.text != "slept 2000 tag=remote-ro" {
				t.Fatalf("after the restart: isError=%v text=%q\nlog:\n%s", got.isError, got.text, m.Log.Text())
			}
			if _, err := os.Stat(filepath.Join(lab.Started, "remote-ro")); err != nil {
				t.Errorf("the retry did not reach the restarted server: %v", err)
			}
			m.Log.WaitLine(t, "retried audit", ts.Msg("call", "tool", "docs__slow", "outcome", "retried"))
			m.Log.WaitLine(t, "retry warning", ts.Msg("server went away during a read-only call; retrying once on its next session", "server", "docs", "tool", "docs__slow"))
			if after := childPid(t, m, "docs"); after != r.Pid() || after == before {
				t.Errorf("docs__whoami = %d after the restart; old pid %d, new %d", after, before, r.Pid())
			}
		})
	}
}

// A write in flight when the remote child dies is not replayed on the new
// session: it ran once, and the caller is told it may or may not have taken
// effect.
func TestRemoteKilledDuringWriteIsNotReplayed(t *testing.T) {
	for _, transport := range remoteTransports {
		t.Run(transport, func(t *testing.T) {
			lab, r := remoteLabMux(t, remoteKillMux, transport, `startup_timeout = "10s"`)
			m := ts.StartMux(t, lab)

			done := callAsync(m, "docs__append_note", map[string]any{"text": "one", "delay_ms": 60000})
			ts.WaitFor(t, "the write's side effect", func() bool { return lab.NotesOf(t, "docs") == "one\n" })
			r.Kill()
			r.Restart()

			got := wait(t, done, "docs__append_note")
			if !got.isError || !strings.Contains(got.text, "may or may not have taken effect") || !strings.Contains(got.text, "not retried") {
				t.Fatalf("isError=%v text=%q", got.isError, got.text)
			}
			m.Log.WaitLine(t, "interrupted audit", ts.Msg("call", "tool", "docs__append_note", "outcome", "interrupted"))
			if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
				t.Errorf("after the restart: %q", got)
			}
			if got := childPid(t, m, "docs"); got != r.Pid() {
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
	lab, r := remoteLab(t, "", `ping_interval = "200ms"`+"\n"+`startup_timeout = "1s"`)
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

	names := m.WaitTools("has no docs tools", func(n []string) bool { return !hasPrefix(n, "docs__") })
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
// and tell its own client.
func TestRemoteCatalogReRead(t *testing.T) {
	lab, _ := remoteLab(t, "", "")
	m := ts.StartMux(t, lab)
	if names := m.ToolNames(); ts.Contains(names, "docs__extra") {
		t.Fatalf("docs__extra listed before notify_changed: %v", names)
	}
	m.DrainNotifications()
	if got := ts.Text(m.MustCall("docs__notify_changed", nil)); got != "extra on" {
		t.Fatalf("notify_changed: %q", got)
	}
	m.WaitTools("has docs__extra", func(n []string) bool { return ts.Contains(n, "docs__extra") })
	if got := ts.Text(m.MustCall("docs__extra", nil)); got != "docs: extra" {
		t.Errorf("docs__extra: %q", got)
	}
	if got := ts.Text(m.MustCall("docs__notify_changed", nil)); got != "extra off" {
		t.Fatalf("notify_changed: %q", got)
	}
	m.WaitTools("has no docs__extra", func(n []string) bool { return !ts.Contains(n, "docs__extra") })
}

// The remote server restarts between two calls, so its new process answers
// the old session id with 404: mcpmux initializes a new session, and a
// read-only call still succeeds.
func TestRemoteRestartBetweenCallsReadOnly(t *testing.T) {
	lab, r := remoteLab(t, "", `startup_timeout = "10s"`)
	m := ts.StartMux(t, lab)
	before := childPid(t, m, "docs")

	r.Kill()
	r.Restart()
	res := m.MustCall("docs__search", map[string]any{"query": "public"})
	if res.IsError || ts.Text(res) != "docs: public evidence" {
		t.Fatalf("after the restart: isError=%v %q\nlog:\n%s", res.IsError, ts.Text(res), m.Log.Text())
	}
	lines := m.Log.Lines(ts.Msg("call", "tool", "docs__search"))
	t.Logf("outcome of the first call after the restart: %v", lines[len(lines)-1]["outcome"])
	gone := m.Log.WaitLine(t, "the old session marked lost", ts.Msg("server went away; restarting", "server", "docs"))
	t.Logf("why: %v", gone["why"])
	if after := childPid(t, m, "docs"); after == before || after != r.Pid() {
		t.Errorf("docs__whoami = %d; old pid %d, new %d", after, before, r.Pid())
	}
}

// The same with a write: the restarted server answered the old session id
// with 404, so the write provably never ran anywhere. It should go to the new
// session rather than fail with "may or may not have taken effect".
func TestRemoteRestartBetweenCallsWrite(t *testing.T) {
	lab, r := remoteLab(t, "", `startup_timeout = "10s"`)
	m := ts.StartMux(t, lab)
	before := childPid(t, m, "docs")

	r.Kill()
	r.Restart()
	res := m.MustCall("docs__append_note", map[string]any{"text": "after"})
	lines := m.Log.Lines(ts.Msg("call", "tool", "docs__append_note"))
	if len(lines) > 0 {
		t.Logf("outcome: %v", lines[len(lines)-1]["outcome"])
	}
	if res.IsError || ts.Text(res) != "noted" {
		t.Errorf("a write on the first call after the remote server restarted: isError=%v %q", res.IsError, ts.Text(res))
	}
	if notes := lab.NotesOf(t, "docs"); notes != "after\n" && !res.IsError {
		t.Errorf("notes = %q, want one write", notes)
	}
	// The next call works either way.
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("then: %q", got)
	}
	if after := childPid(t, m, "docs"); after == before {
		t.Errorf("docs__whoami = %d, unchanged", after)
	}
}
