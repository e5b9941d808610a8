package limits

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The limits of the HTTP upstream, end to end against the real binary:
// bodies, headers, slow senders, clients that stop reading, session caps,
// and what the admin endpoints show and where.

// addLimits appends a [limits] table to the lab's config.
func addLimits(t *testing.T, lab *ts.Lab, lines string) {
	t.Helper()
	f, err := os.OpenFile(lab.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n[limits]\n" + lines + "\n"); err != nil {
		t.Fatal(err)
	}
}

// zeros is an endless body; it never holds more than one read's bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// rawConn dials mcpmux's MCP listener, with a deadline that only a hang
// reaches.
func rawConn(t *testing.T, hostport string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(2 * ts.Wait))
	return conn
}

// postHead is the head of a POST to /mcp, ending with extra header lines.
func postHead(hostport, extra string) string {
	return "POST /mcp HTTP/1.1\r\nHost: " + hostport + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" + extra + "\r\n"
}

// sendAndRead writes head, then streams body in the background until the
// server stops taking it, and reads the answer.
func sendAndRead(t *testing.T, conn net.Conn, head string, body func(io.Writer) error) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	if body != nil {
		wg.Go(func() { _ = body(conn) })
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = conn.Close() // ends the writer, if the server has not
	wg.Wait()
	return resp, string(b)
}

// A 400 MB body is refused with 413 whether its length is declared or it
// comes chunked, and mcpmux's memory stays where it was: it reads at most
// max_body_bytes of it.
func TestHTTPHugeBody(t *testing.T) {
	t.Parallel()
	const huge = 400 << 20
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	pid := h.Cmd.Process.Pid
	ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log}).MustCall("docs__search", map[string]any{"query": "public"})
	rss0, peak0 := ts.Memory(t, pid)

	for _, c := range []struct {
		name string
		head string
		body func(io.Writer) error
	}{
		{"Content-Length", fmt.Sprintf("Content-Length: %d\r\n", huge), func(w io.Writer) error {
			_, err := io.Copy(w, io.LimitReader(zeros{}, huge))
			return err
		}},
		{"chunked", "Transfer-Encoding: chunked\r\n", func(w io.Writer) error {
			cw := httputil.NewChunkedWriter(w)
			if _, err := io.Copy(cw, io.LimitReader(zeros{}, huge)); err != nil {
				return err
			}
			return cw.Close()
		}},
	} {
		resp, text := sendAndRead(t, rawConn(t, h.HostPort(0)), postHead(h.HostPort(0), c.head), c.body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(text, "max_body_bytes (4194304 bytes)") {
			t.Errorf("%s: %d %q, want 413 naming max_body_bytes", c.name, resp.StatusCode, text)
		}
		if !resp.Close {
			t.Errorf("%s: the connection is kept open after the 413", c.name)
		}
	}
	rss1, peak1 := ts.Memory(t, pid)
	t.Logf("mcpmux memory: VmRSS %d KiB before, %d KiB after; VmHWM %d KiB before, %d KiB after",
		rss0>>10, rss1>>10, peak0>>10, peak1>>10)
	if grew := peak1 - max(peak0, rss0); grew > 16<<20 {
		t.Errorf("mcpmux's peak memory grew by %d KiB for two 400 MB bodies", grew>>10)
	}
	// mcpmux still serves.
	ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log}).MustCall("docs__search", map[string]any{"query": "public"})
}

// Many clients that each declare a body of max_body_bytes, send a little of
// it and stall are each cut off after read_timeout, and what mcpmux holds
// for them grows with what they sent, not with what they declared.
func TestHTTPSlowDeclaredBodies(t *testing.T) {
	t.Parallel()
	const clients, rounds, declared, sent = 100, 4, 4 << 20, 4 << 10
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	addLimits(t, lab, `read_timeout = "1s"`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	pid, hp := h.Cmd.Process.Pid, h.HostPort(0)
	ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log}).MustCall("docs__search", map[string]any{"query": "public"})
	rss0, peak0 := ts.Memory(t, pid)

	head := postHead(hp, fmt.Sprintf("Content-Length: %d\r\n", declared))
	part := strings.Repeat(" ", sent)
	// Rounds, since only memory the Go runtime reuses (and so clears) is
	// surely resident: a first round's buffers could stay untouched.
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				conn, err := net.Dial("tcp", hp)
				if err != nil {
					t.Errorf("round %d client %d: %v", round, i, err)
					return
				}
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(2 * ts.Wait))
				if _, err := io.WriteString(conn, head+part); err != nil {
					t.Errorf("round %d client %d: %v", round, i, err)
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Errorf("round %d client %d: reading the answer: %v", round, i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "read_timeout (1s)") {
					t.Errorf("round %d client %d: %d %q, want 408 naming read_timeout", round, i, resp.StatusCode, b)
				}
			})
		}
		wg.Wait()
	}
	rss1, peak1 := ts.Memory(t, pid)
	t.Logf("mcpmux memory for %d rounds of %d clients declaring %d KiB and sending %d KiB: VmRSS %d KiB before, %d KiB after; VmHWM %d KiB before, %d KiB after",
		rounds, clients, declared>>10, sent>>10, rss0>>10, rss1>>10, peak0>>10, peak1>>10)
	if grew, bound := peak1-max(peak0, rss0), ts.RSSLimitMiB(t, 32)<<20; grew > bound {
		t.Errorf("mcpmux's peak memory grew by %d KiB (bound %d KiB) for clients that sent %d KiB in all", grew>>10, bound>>10, clients*sent>>10)
	}
	ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log}).MustCall("docs__search", map[string]any{"query": "public"})
}

// Headers over max_header_bytes are 431; a header or a body that stalls is
// cut off after read_header_timeout or read_timeout.
func TestHTTPSlowAndLargeHeadersAndBodies(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	addLimits(t, lab, "max_header_bytes = \"16KiB\"\nread_header_timeout = \"1s\"\nread_timeout = \"1s\"")
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	hp := h.HostPort(0)

	t.Run("header flood", func(t *testing.T) {
		var b strings.Builder
		for i := range 64 {
			fmt.Fprintf(&b, "X-Flood-%d: %s\r\n", i, strings.Repeat("a", 1024))
		}
		resp, _ := sendAndRead(t, rawConn(t, hp), postHead(hp, b.String()+"Content-Length: 2\r\n"), func(w io.Writer) error {
			_, err := io.WriteString(w, "{}")
			return err
		})
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB of headers: %d, want 431", resp.StatusCode)
		}
	})

	t.Run("stalled header", func(t *testing.T) {
		conn := rawConn(t, hp)
		if _, err := io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: "+hp+"\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		// mcpmux closes the connection; only our own deadline, far
		// beyond read_header_timeout, would make this fail otherwise.
		_, err := io.Copy(io.Discard, conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("a stalled header was not cut off: %v", err)
		}
	})

	t.Run("stalled body", func(t *testing.T) {
		// 17 of the 1000 bytes promised, then nothing.
		resp, text := sendAndRead(t, rawConn(t, hp), postHead(hp, "Content-Length: 1000\r\n"), func(w io.Writer) error {
			_, err := io.WriteString(w, `{"jsonrpc":"2.0",`)
			return err
		})
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(text, "read_timeout (1s)") || !resp.Close {
			t.Errorf("a stalled body: %d %q (close %v), want 408 naming read_timeout and a closed connection", resp.StatusCode, text, resp.Close)
		}
	})

	// None of it hurt anyone else.
	ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log}).MustCall("docs__search", map[string]any{"query": "public"})
}

// An authenticated client that sends its body a byte at a time is answered
// 408 once read_timeout has passed since mcpmux began to read the body,
// and its connection is closed then: mcpmux does not go on reading the
// rest of the declared body at the client's pace.
func TestHTTPTrickledBody(t *testing.T) {
	t.Parallel()
	const token = "trickle-token-4e1a9c"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(token)), ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	addLimits(t, lab, `read_timeout = "1s"`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	hp := h.HostPort(0)
	// 17 bytes, then the other 983 of the 1000 declared one every 20 ms:
	// about 20 s, beyond the client's own bound (ts.Wait).
	const rest = 983
	got := ts.Trickle(t, hp, postHead(hp, "Authorization: Bearer "+token+"\r\nContent-Length: 1000\r\n"), []byte(`{"jsonrpc":"2.0",`), rest, 20*time.Millisecond)
	if got.Resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(got.Body, "read_timeout (1s)") || !got.Resp.Close {
		t.Errorf("a trickled body: %d %q (close %v), want 408 naming read_timeout and a closed connection", got.Resp.StatusCode, got.Body, got.Resp.Close)
	}
	if !got.Closed || got.Sent == rest {
		t.Errorf("the connection stayed open after the 408 (closed %v, %d of the %d bytes trickled)", got.Closed, got.Sent, rest)
	}
	m := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: token, Log: h.Log})
	m.MustCall("docs__search", map[string]any{"query": "public"})
}

// write_timeout bounds each write, not the answer: a call slower than it
// is answered and a listening stream outlives it, while a client that
// stops reading a large answer is cut off.
func TestHTTPWriteTimeout(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	addLimits(t, lab, "write_timeout = \"1s\"\nmax_body_bytes = \"32MiB\"\nmax_message_bytes = \"128MiB\"")
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})

	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Listen: true, Log: h.Log})
	if got := ts.Text(conn.MustCall("docs__slow", map[string]any{"ms": 2500, "tag": "past-write-timeout"})); got != "slept 2500 tag=past-write-timeout" {
		t.Errorf("a call slower than write_timeout: %q", got)
	}
	// The listening stream opened before the slow call still delivers.
	lab.WritePolicy(t, "reader", `allow = ["docs__echo", "docs__search"]`)
	conn.Notification(mcp.MethodNotificationToolsListChanged)

	// A client that asks for a large answer and never reads it.
	sid := conn.Client.GetSessionId()
	// The answer carries msg twice (text and structured content): far more
	// than the socket buffers between mcpmux and a client that reads
	// nothing hold.
	msg := strings.Repeat("x", 4<<20)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call",
		"params": map[string]any{"name": "docs__echo", "arguments": map[string]any{"message": msg}}})
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	stuck, err := d.DialContext(ctx, "tcp", h.HostPort(0))
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	head := postHead(h.HostPort(0), fmt.Sprintf("Content-Length: %d\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\n", len(body), sid, mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if _, err := io.WriteString(stuck, head); err != nil {
		t.Fatal(err)
	}
	if _, err := stuck.Write(body); err != nil {
		t.Fatal(err)
	}
	// The call itself takes a while with a body this size (seconds under
	// the race detector), so the wait is longer than ts.Wait.
	h.Log.WaitLineWithin(t, 6*ts.Wait, "a write to the client that stopped reading to fail", func(l map[string]any) bool {
		m, _ := l["message"].(string)
		return strings.HasPrefix(m, "could not write to the client")
	})
	// What the client gets now is cut short.
	_ = stuck.SetDeadline(time.Now().Add(ts.Wait))
	resp, err := http.ReadResponse(bufio.NewReader(stuck), nil)
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, resp.Body)
		if err == nil {
			t.Errorf("the client that stopped reading got the whole answer (%d bytes)", n)
		}
	}
	// The session itself is fine.
	conn.MustCall("docs__search", map[string]any{"query": "public"})
}

// Over max_sessions_per_identity a new session is 429, over max_sessions
// 503, each saying which limit; the sessions already open keep working.
func TestHTTPSessionLimits(t *testing.T) {
	t.Parallel()
	const aliceToken, bobToken = "alice-limits-token-51aa", "bob-limits-token-0c9d"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+
		ts.TokenEntry("alice", "sha256", ts.SHA256Hex(aliceToken))+ts.TokenEntry("bob", "sha256", ts.SHA256Hex(bobToken)),
		ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "alice", `allow = ["*"]`)
	lab.WritePolicy(t, "bob", `allow = ["*"]`)
	addLimits(t, lab, "max_sessions = 5\nmax_sessions_per_identity = 3")
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})

	var conns []*ts.Conn
	for _, tok := range []string{aliceToken, aliceToken, aliceToken, bobToken, bobToken} {
		conns = append(conns, ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: tok, Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log}))
	}
	for _, c := range []struct {
		token string
		code  int
		says  string
	}{
		{aliceToken, http.StatusTooManyRequests, `identity "alice" holds max_sessions_per_identity (3)`},
		{bobToken, http.StatusServiceUnavailable, "max_sessions (5) are open"},
	} {
		a := ts.PostInitialize(t, h.URL(), "Bearer "+c.token)
		if a.Status != c.code || !strings.Contains(string(a.Body), c.says) || a.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("one session too many: %d %q, want %d saying %q", a.Status, a.Body, c.code, c.says)
		}
	}
	for _, c := range conns {
		c.MustCall("docs__search", map[string]any{"query": "public"})
	}
	fams, _ := ts.Scrape(t, h.Base(0))
	if n, _ := ts.Sample(fams, "mcpmux_sessions", map[string]string{"identity": "alice"}); n != 3 {
		t.Errorf("mcpmux_sessions{identity=alice} = %v, want 3", n)
	}
	// A session ended frees its slot.
	end := http.Header{"Authorization": {"Bearer " + aliceToken}, "Mcp-Session-Id": {conns[0].Client.GetSessionId()}}
	if a := ts.Do(t, http.MethodDelete, h.URL(), "", end, ""); a.Status != http.StatusOK {
		t.Fatalf("DELETE: %d %q", a.Status, a.Body)
	}
	ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: aliceToken, Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log}).
		MustCall("docs__search", map[string]any{"query": "public"})
}

// On a listener beyond loopback, /readyz and /metrics are only on
// admin_listen; /healthz stays.
func TestHTTPAdminEndpointsOffAPublicListener(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		upstream string
		admin    bool
	}{
		{"without admin_listen", "listen = \"0.0.0.0:0\"\nallow_unauthenticated = true", false},
		{"with admin_listen", "listen = \"0.0.0.0:0\"\nallow_unauthenticated = true\nadmin_listen = \"127.0.0.1:0\"", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lab := ts.HTTPLab(t, "", c.upstream, ts.Server{Alias: "docs"})
			lab.WritePolicy(t, "reader", `allow = ["*"]`)
			listeners := 1
			if c.admin {
				listeners = 2
			}
			h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Listeners: listeners})
			ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log}).MustCall("docs__search", map[string]any{"query": "public"})
			want := map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusNotFound, "/metrics": http.StatusNotFound}
			if c.admin {
				want["/healthz"] = http.StatusNotFound
			}
			for p, code := range want {
				if a := ts.Get(t, h.Base(0)+p); a.Status != code {
					t.Errorf("MCP listener %s: %d, want %d", p, a.Status, code)
				}
			}
			if c.admin {
				ts.WaitReadyz(t, h.Base(1), "200 on admin_listen", func(code int, _ ts.Readiness) bool { return code == http.StatusOK })
				ts.Scrape(t, h.Base(1))
			} else {
				h.Log.WaitLine(t, "the warning that /readyz and /metrics are not served", func(l map[string]any) bool {
					m, _ := l["message"].(string)
					return strings.Contains(m, "served only on admin_listen")
				})
			}
		})
	}
}

// /readyz names each failing child's kind of failure in mcpmux's words,
// never with what a remote server sent.
func TestHTTPReadyzReasons(t *testing.T) {
	t.Parallel()
	const secret = "SECRET-upstream-body-4d1e"
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database password is "+secret, http.StatusBadGateway)
	}))
	t.Cleanup(failing.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/mcp"
	_ = closed.Close()

	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`,
		ts.Server{Alias: "docs"},
		ts.Server{Alias: "exits", Env: map[string]string{"LAB_FAIL_INIT": "1"}, Extra: "required = false"},
		ts.Server{Alias: "missing", Command: "/nonexistent/mcp-server", Extra: "required = false"},
	)
	lab.AddRemote(t, ts.RemoteServer{Alias: "badgw", URL: failing.URL + "/mcp", Extra: "required = false"})
	lab.AddRemote(t, ts.RemoteServer{Alias: "refused", URL: closedURL, Extra: "required = false"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})

	want := map[string]string{"exits": "exited", "missing": "start failed", "badgw": "http 5xx", "refused": "connection refused"}
	r := ts.WaitReadyz(t, h.Base(0), "every failing child with a reason", func(code int, r ts.Readiness) bool {
		for _, s := range r.Servers {
			if _, ok := want[s.Name]; ok && s.Reason == nil {
				return false
			}
		}
		return code == http.StatusOK
	})
	for _, s := range r.Servers {
		if w, ok := want[s.Name]; ok && *s.Reason != w {
			t.Errorf("%s: reason %q, want %q", s.Name, *s.Reason, w)
		}
	}
	if a := ts.Get(t, h.Base(0)+"/readyz"); strings.Contains(string(a.Body), secret) || strings.Contains(string(a.Body), "password") {
		t.Errorf("/readyz passes on a remote body: %s", a.Body)
	}
}
