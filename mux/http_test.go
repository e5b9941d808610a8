package mux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// httpMux is a real Mux with one real child (an in-process mcp-go server
// over HTTP) and its real HTTP upstream, served by httptest. The caller's
// identity is the X-Identity header.
type httpMux struct {
	m   *Mux
	up  *edge.HTTPUpstream
	url string
}

func startHTTPMux(t *testing.T, idle time.Duration, limits config.Limits) *httpMux {
	t.Helper()
	m := startLab(t, labSpec{tools: []server.ServerTool{{Tool: mcp.NewTool("echo", mcp.WithString("message")),
		Handler: func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(r.GetString("message", "")), nil
		}}}})
	up, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp", SessionIdleTimeout: idle, Limits: limits},
		func(r *http.Request) string { return r.Header.Get("X-Identity") })
	return &httpMux{m: m, up: up, url: url}
}

const testInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// send makes one request as identity, in session sid ("" for none).
func (h *httpMux) send(t *testing.T, method, identity, sid, body string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, h.url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Identity", identity)
	if sid != "" {
		req.Header.Set(server.HeaderKeySessionID, sid)
		req.Header.Set(server.HeaderKeyProtocolVersion, "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s as %s: %v", method, identity, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// open initializes a session as identity and returns its id, or "" and
// the refusal's status and text.
func (h *httpMux) open(t *testing.T, identity string) (sid string, code int, text string) {
	t.Helper()
	code, text, hdr := h.send(t, http.MethodPost, identity, "", testInitialize)
	return hdr.Get(server.HeaderKeySessionID), code, text
}

// inMcpGo reports whether mcp-go still has session id registered.
func (h *httpMux) inMcpGo(id string) bool {
	return h.m.srv.SendNotificationToSpecificClient(id, "notifications/message", nil) == nil
}

// Over either cap, a new session is refused with a status and a text that
// say which; nobody's session is dropped for it, and a freed slot is
// taken again.
func TestHTTPSessionCaps(t *testing.T) {
	h := startHTTPMux(t, time.Hour, config.Limits{MaxSessions: 3, MaxSessionsPerIdentity: 2})
	var open []struct{ who, sid string }
	for _, who := range []string{"alice", "alice", "bob"} {
		sid, code, text := h.open(t, who)
		if sid == "" {
			t.Fatalf("session for %s refused: %d %s", who, code, text)
		}
		open = append(open, struct{ who, sid string }{who, sid})
	}
	for _, c := range []struct {
		who  string
		code int
		says string
	}{
		{"alice", http.StatusTooManyRequests, "max_sessions_per_identity (2)"},
		{"carol", http.StatusServiceUnavailable, "max_sessions (3)"},
	} {
		sid, code, text := h.open(t, c.who)
		if sid != "" || code != c.code || !strings.Contains(text, c.says) || !strings.Contains(text, "new session refused") {
			t.Errorf("session %d for %s: %d %q, want %d saying %q", len(open)+1, c.who, code, text, c.code, c.says)
		}
	}
	for _, o := range open {
		if code, text, _ := h.send(t, http.MethodPost, o.who, o.sid, testsupport.PingBody); code != http.StatusOK {
			t.Errorf("%s's session after the refusals: %d %s", o.who, code, text)
		}
	}
	if total, alice := h.m.sessions.Counts("alice"); total != 3 || alice != 2 {
		t.Errorf("counts = %d total, %d alice; want 3, 2", total, alice)
	}
	// alice ends one; she may open one again, and then nobody may.
	if code, text, _ := h.send(t, http.MethodDelete, "alice", open[0].sid, ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", code, text)
	}
	if sid, code, text := h.open(t, "alice"); sid == "" {
		t.Errorf("alice after a DELETE: %d %s", code, text)
	}
	if _, code, _ := h.open(t, "carol"); code != http.StatusServiceUnavailable {
		t.Errorf("carol with 3 open: %d", code)
	}
}

// A flood of concurrent initializes opens exactly as many sessions as the
// caps allow; the rest are refused, and every session opened works.
func TestHTTPSessionFlood(t *testing.T) {
	const perIdentity, total, callers = 10, 25, 120
	h := startHTTPMux(t, time.Hour, config.Limits{MaxSessions: total, MaxSessionsPerIdentity: perIdentity})
	type result struct {
		who, sid string
		code     int
	}
	results := make(chan result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		who := fmt.Sprintf("id%d", i%4)
		wg.Go(func() {
			sid, code, _ := h.open(t, who)
			results <- result{who, sid, code}
		})
	}
	wg.Wait()
	close(results)
	byWho := map[string]int{}
	var opened []result
	for r := range results {
		switch {
		case r.sid != "":
			byWho[r.who]++
			opened = append(opened, r)
		case r.code != http.StatusTooManyRequests && r.code != http.StatusServiceUnavailable:
			t.Errorf("%s refused with %d", r.who, r.code)
		}
	}
	if len(opened) != total {
		t.Errorf("%d sessions opened, want %d", len(opened), total)
	}
	for who, n := range byWho {
		if n > perIdentity {
			t.Errorf("%s holds %d sessions, over %d", who, n, perIdentity)
		}
	}
	for _, r := range opened {
		if code, text, _ := h.send(t, http.MethodPost, r.who, r.sid, testsupport.PingBody); code != http.StatusOK {
			t.Errorf("%s's session: %d %s", r.who, code, text)
		}
	}
}

// A session id the registry does not hold for the caller is 404 for every
// method; an ended session leaves nothing behind, in the registry or in
// mcp-go, however many come and go.
func TestHTTPEndedSessionsLeaveNothing(t *testing.T) {
	h := startHTTPMux(t, time.Hour, config.Limits{MaxSessions: 5, MaxSessionsPerIdentity: 5})
	var last string
	for range 300 {
		sid, code, text := h.open(t, "alice")
		if sid == "" {
			t.Fatalf("open: %d %s", code, text)
		}
		if !h.inMcpGo(sid) {
			t.Fatalf("mcp-go does not hold the open session %s", sid)
		}
		if code, text, _ := h.send(t, http.MethodDelete, "alice", sid, ""); code != http.StatusOK {
			t.Fatalf("DELETE: %d %s", code, text)
		}
		last = sid
	}
	if total, alice := h.m.sessions.Counts("alice"); total != 0 || alice != 0 {
		t.Errorf("after 300 sessions ended: counts %d, %d", total, alice)
	}
	if n := h.m.sessions.Held(); n != 0 || h.inMcpGo(last) {
		t.Errorf("after 300 sessions ended: %d ids held, mcp-go holds the last: %v", h.m.sessions.Held(), h.inMcpGo(last))
	}
	live, _, _ := h.open(t, "alice")
	for _, c := range []struct{ method, who, sid, body string }{
		{http.MethodPost, "alice", last, testsupport.PingBody},
		{http.MethodGet, "alice", last, ""},
		{http.MethodDelete, "alice", last, ""},
		{http.MethodPost, "alice", "mcp-session-never-issued", testsupport.PingBody},
		{http.MethodPost, "bob", live, testsupport.PingBody},
		{http.MethodGet, "bob", live, ""},
		{http.MethodDelete, "bob", live, ""},
	} {
		if code, text, _ := h.send(t, c.method, c.who, c.sid, c.body); code != http.StatusNotFound {
			t.Errorf("%s as %s in %s: %d %q, want 404", c.method, c.who, c.sid, code, text)
		}
	}
	if code, _, _ := h.send(t, http.MethodPost, "alice", live, testsupport.PingBody); code != http.StatusOK {
		t.Errorf("alice's own session after bob's tries: %d", code)
	}
}

// An idle session ends in the registry and in mcp-go alike, and is 404
// from then on; a session with a listening stream open is not idle.
func TestHTTPIdleSessionEndsEverywhere(t *testing.T) {
	h := startHTTPMux(t, time.Second, config.Limits{})
	idle, _, _ := h.open(t, "alice")
	streaming, _, _ := h.open(t, "alice")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("X-Identity", "alice")
	req.Header.Set(server.HeaderKeySessionID, streaming)
	req.Header.Set(server.HeaderKeyProtocolVersion, "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, resp)
	}
	defer resp.Body.Close()

	// The registry lets it go first, then mcp-go (expire): both must.
	testsupport.WaitFor(t, "the idle session to end in the registry and in mcp-go", func() bool {
		return h.m.sessions.Lookup(idle) == nil && !h.inMcpGo(idle)
	})
	if code, _, _ := h.send(t, http.MethodPost, "alice", idle, testsupport.PingBody); code != http.StatusNotFound {
		t.Errorf("the expired session: %d, want 404", code)
	}
	if h.m.sessions.Lookup(streaming) == nil || !h.inMcpGo(streaming) {
		t.Error("the session with a listening stream was ended as idle")
	}
	if code, text, _ := h.send(t, http.MethodPost, "alice", streaming, testsupport.PingBody); code != http.StatusOK {
		t.Errorf("the streaming session: %d %s", code, text)
	}
	// Ending the session ends its stream.
	if code, _, _ := h.send(t, http.MethodDelete, "alice", streaming, ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("stream ended with %v", err)
	}
}

// rawPOST writes a POST's head and then body as given, and returns the
// response that comes back.
func rawPOST(t *testing.T, url string, head string, body io.Reader) (*http.Response, string) {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "POST "+u.Path+" HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nX-Identity: alice\r\n"+head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(conn, body) }() // ends when the server closes
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// stall is a body that sends its bytes and then nothing, until closed.
type stall struct {
	r    io.Reader
	done chan struct{}
}

func (s *stall) Read(p []byte) (int, error) {
	if n, err := s.r.Read(p); err != io.EOF {
		return n, err
	}
	<-s.done
	return 0, io.EOF
}

// A body over max_body_bytes is 413: at once when its length says so, when
// the limit is reached when it does not; a body that stalls is 408 after
// read_timeout. The connection is closed after each.
func TestHTTPBodyLimits(t *testing.T) {
	const limit = 64 << 10
	h := startHTTPMux(t, time.Hour, config.Limits{MaxBodyBytes: limit, ReadTimeout: 300 * time.Millisecond})
	done := make(chan struct{})
	defer close(done)
	big := strings.Repeat(" ", 1<<20)
	for _, c := range []struct {
		name string
		head string
		body io.Reader
		code int
		says string
	}{
		// No byte of the body is ever sent: a server that read it would
		// wait for read_timeout and answer 408.
		{"declared length over the limit", "Content-Length: 1048576\r\n", &stall{r: strings.NewReader(""), done: done}, http.StatusRequestEntityTooLarge, "max_body_bytes (65536 bytes)"},
		{"chunked over the limit", "Transfer-Encoding: chunked\r\n", strings.NewReader(fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big)), http.StatusRequestEntityTooLarge, "max_body_bytes"},
		{"stalled body", "Content-Length: 100\r\n", &stall{r: strings.NewReader(`{"jsonrpc":`), done: done}, http.StatusRequestTimeout, "read_timeout (300ms)"},
		{"within the limit", fmt.Sprintf("Content-Length: %d\r\n", len(testInitialize)), strings.NewReader(testInitialize), http.StatusOK, `"protocolVersion"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, text := rawPOST(t, h.url, c.head, c.body)
			if resp.StatusCode != c.code || !strings.Contains(text, c.says) {
				t.Errorf("%d %q, want %d saying %q", resp.StatusCode, text, c.code, c.says)
			}
			if c.code != http.StatusOK && !resp.Close {
				t.Errorf("the connection stays open after %d", resp.StatusCode)
			}
		})
	}
}

// A body sent a byte at a time must still arrive whole within
// read_timeout from when mcpmux begins to read it: the client is answered
// 408, and the connection is closed then, not held open while the rest of
// the declared body trickles in (net/http would read it to its end to reuse
// the connection). Nor does a body refused as too large keep mcpmux reading
// whatever the client still sends. Each trickle would take 10 s or more;
// the server must be done with it long before the trickle is.
func TestHTTPTrickledBodyBounded(t *testing.T) {
	h := startHTTPMux(t, time.Hour, config.Limits{MaxBodyBytes: 512, ReadTimeout: 300 * time.Millisecond})
	u, err := neturl.Parse(h.url)
	if err != nil {
		t.Fatal(err)
	}
	head := func(extra string) string {
		return "POST " + u.Path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nX-Identity: alice\r\n" + extra + "\r\n"
	}
	const every = 20 * time.Millisecond
	for _, c := range []struct {
		name, head, first string
		rest              int // the bytes that complete the body, trickled
		code              int
		says              string
	}{
		{"trickled body", head("Content-Length: 500\r\n"), `{"jsonrpc":`, 489, http.StatusRequestTimeout, "read_timeout (300ms)"},
		{"declared length over the limit", head("Content-Length: 1000\r\n"), "", 1000, http.StatusRequestEntityTooLarge, "max_body_bytes (512 bytes)"},
		{"chunked past the limit", head("Transfer-Encoding: chunked\r\n"), "100000\r\n" + strings.Repeat(" ", 600), 1000, http.StatusRequestEntityTooLarge, "max_body_bytes (512 bytes)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := testsupport.Trickle(t, u.Host, c.head, []byte(c.first), c.rest, every)
			if got.Resp.StatusCode != c.code || !strings.Contains(got.Body, c.says) || !got.Resp.Close {
				t.Errorf("%d %q (close %v), want %d saying %q and a closed connection", got.Resp.StatusCode, got.Body, got.Resp.Close, c.code, c.says)
			}
			if !got.Closed || got.Sent == c.rest {
				t.Errorf("the connection stayed open after the answer (closed %v, %d of the %d bytes trickled)", got.Closed, got.Sent, c.rest)
			}
		})
	}
}

// Limits left zero are the config defaults, not "no bound": a declared
// length over the default max_body_bytes is refused before a byte is read.
func TestHTTPZeroLimitsAreDefaults(t *testing.T) {
	h := startHTTPMux(t, time.Hour, config.Limits{})
	done := make(chan struct{})
	defer close(done)
	resp, text := rawPOST(t, h.url, fmt.Sprintf("Content-Length: %d\r\n", config.DefaultMaxBodyBytes+1), &stall{r: strings.NewReader(""), done: done})
	if want := fmt.Sprintf("max_body_bytes (%d bytes)", config.DefaultMaxBodyBytes); resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(text, want) {
		t.Errorf("%d %q, want 413 saying %q", resp.StatusCode, text, want)
	}
}

// max_message_bytes bounds an HTTP body too, when it is the smaller limit,
// and the refusal names it.
func TestHTTPBodyOverMaxMessageBytes(t *testing.T) {
	const limit = 8 << 10
	h := startHTTPMux(t, time.Hour, config.Limits{MaxBodyBytes: 1 << 20, MaxMessageBytes: limit})
	done := make(chan struct{})
	defer close(done)
	big := strings.Repeat(" ", 2*limit)
	for _, c := range []struct {
		name string
		head string
		body io.Reader
	}{
		{"declared", fmt.Sprintf("Content-Length: %d\r\n", limit+1), &stall{r: strings.NewReader(""), done: done}},
		{"chunked", "Transfer-Encoding: chunked\r\n", strings.NewReader(fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big))},
	} {
		resp, text := rawPOST(t, h.url, c.head, c.body)
		if want := "max_message_bytes (8192 bytes)"; resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(text, want) {
			t.Errorf("%s: %d %q, want 413 saying %q", c.name, resp.StatusCode, text, want)
		}
	}
	if resp, text := rawPOST(t, h.url, fmt.Sprintf("Content-Length: %d\r\n", len(testInitialize)), strings.NewReader(testInitialize)); resp.StatusCode != http.StatusOK {
		t.Errorf("a body within both: %d %q", resp.StatusCode, text)
	}
}

// An initialize is whatever mcp-go decodes as one, its method escaped
// included: it is admitted against the caps like any other, and the
// session it opens is handed out and works.
func TestHTTPEscapedInitialize(t *testing.T) {
	h := startHTTPMux(t, time.Hour, config.Limits{MaxSessions: 1})
	escaped := strings.Replace(testInitialize, `"initialize"`, `"\u0069nitialize"`, 1)
	code, text, hdr := h.send(t, http.MethodPost, "alice", "", escaped)
	sid := hdr.Get(server.HeaderKeySessionID)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("escaped initialize: %d %q, session %q", code, text, sid)
	}
	if code, text, _ := h.send(t, http.MethodPost, "alice", sid, testsupport.PingBody); code != http.StatusOK {
		t.Errorf("its session: %d %s", code, text)
	}
	code, text, hdr = h.send(t, http.MethodPost, "bob", "", escaped)
	if code != http.StatusServiceUnavailable || hdr.Get(server.HeaderKeySessionID) != "" {
		t.Errorf("escaped initialize over max_sessions: %d %q", code, text)
	}
	if total, _ := h.m.sessions.Counts("bob"); total != 1 {
		t.Errorf("%d sessions counted, want 1", total)
	}
	if n := h.m.sessions.Held(); n != 1 {
		t.Errorf("%d sessions held, want 1", n)
	}
}

// listen opens a 2026-07-28 subscriptions/listen stream as identity and
// returns its response once its head is in; cancel ends the stream.
func (h *httpMux) listen(t *testing.T, identity string) (resp *http.Response, cancel context.CancelFunc) {
	t.Helper()
	v := mcp.ProtocolVersion20260728
	body := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + v + `","` +
		mcp.MetaKeyClientCapabilities + `":{},"` + mcp.MetaKeyClientInfo + `":{"name":"t","version":"1"}}}}`
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Identity", identity)
	req.Header.Set(mcp.HeaderProtocolVersion, v)
	req.Header.Set(mcp.HeaderMethod, string(mcp.MethodSubscriptionsListen))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("listen as %s: %v", identity, err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return resp, cancel
}

// A 2026-07-28 client has no session id, but each listen stream it holds
// open counts against max_sessions and max_sessions_per_identity, with the
// same 429 and 503 as an initialize, until it ends.
func TestHTTPListenStreamsCount(t *testing.T) {
	h := startHTTPMux(t, time.Hour, config.Limits{MaxSessions: 3, MaxSessionsPerIdentity: 2})
	var cancels []context.CancelFunc
	for _, who := range []string{"alice", "alice", "bob"} {
		resp, cancel := h.listen(t, who)
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("listen as %s: %d %s", who, resp.StatusCode, b)
		}
		cancels = append(cancels, cancel)
	}
	for _, c := range []struct {
		who  string
		code int
		says string
	}{
		{"alice", http.StatusTooManyRequests, "max_sessions_per_identity (2)"},
		{"carol", http.StatusServiceUnavailable, "max_sessions (3)"},
	} {
		resp, _ := h.listen(t, c.who)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.says) {
			t.Errorf("listen as %s: %d %q, want %d saying %q", c.who, resp.StatusCode, b, c.code, c.says)
		}
	}
	if _, code, text := h.open(t, "alice"); code != http.StatusTooManyRequests {
		t.Errorf("initialize as alice with two listen streams: %d %q, want 429", code, text)
	}
	// A stream that ends frees its slot.
	cancels[0]()
	testsupport.WaitFor(t, "the ended stream's slot to be free", func() bool {
		_, alice := h.m.sessions.Counts("alice")
		return alice == 1
	})
	if resp, _ := h.listen(t, "alice"); resp.StatusCode != http.StatusOK {
		t.Errorf("listen as alice after one ended: %d", resp.StatusCode)
	}
}
