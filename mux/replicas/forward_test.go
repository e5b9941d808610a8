package replicas

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// pair is a forwarding replica in front of an owner whose peer listener
// is an httptest server serving mcp through the owner's Peer wrapper.
type pair struct {
	owner  *httptest.Server
	front  *httptest.Server // the forwarder's public endpoint
	sid    string           // a session id the owner owns
	served atomic.Int32     // requests that reached mcp on the owner
}

// local is the forwarder's own endpoint: what a request whose owner is
// gone reaches.
const localAnswer = "served locally"

func newPair(t *testing.T, mcp http.HandlerFunc) *pair {
	t.Helper()
	key := testsupport.NewReplicaKey()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &pair{}
	var ownerNode *Node
	p.owner = httptest.NewUnstartedServer(nil)
	p.owner.Start()
	t.Cleanup(p.owner.Close)
	addr := p.owner.Listener.Addr().String()
	mk := func(self string) *Node {
		n, err := New(config.Replicas{Enabled: true, KeyFile: path, Listen: self, Advertise: self,
			Peers: []string{addr, "127.0.0.1:1"}, DialTimeout: time.Second},
			config.Limits{MaxBodyBytes: 1 << 20, MaxMessageBytes: 1 << 20, ReadTimeout: time.Second,
				WriteTimeout: 5 * time.Second, IdleTimeout: time.Minute}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ownerNode = mk(addr)
	p.owner.Config.Handler = ownerNode.Peer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.served.Add(1)
		mcp(w, r)
	}))
	fwd := mk("127.0.0.1:1")
	t.Cleanup(fwd.client.close)
	p.front = httptest.NewServer(fwd.Public(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, localAnswer, http.StatusNotFound)
	})))
	t.Cleanup(p.front.Close)
	p.sid = sessionPrefix + ownerNode.SealSessionID("s1")
	return p
}

// post sends body with the owner's session id through the forwarder.
func (p *pair) post(t *testing.T, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.front.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Mcp-Session-Id", p.sid)
	resp, err := p.front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return string(b)
}

// An answer is relayed whole, the request as sent: body, end-to-end
// headers, the public Host; not the proof header, not hop-by-hop ones.
func TestForwardRelaysAnswer(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get(PeerHeader) != "" || r.Header.Get("X-Hop") != "" || r.Header.Get("Mcp-Session-Id") == "" {
			http.Error(w, "headers: "+strings.Join(headerNames(r.Header), ","), http.StatusTeapot)
			return
		}
		w.Header().Set("X-Owner", "yes")
		_, _ = io.WriteString(w, "echo "+string(b)+" host "+r.Host)
	})
	req, _ := http.NewRequest(http.MethodPost, p.front.URL+"/mcp", strings.NewReader(`{"a":1}`))
	req.Header.Set("Mcp-Session-Id", p.sid)
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	resp, err := p.front.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, resp)
	want := `echo {"a":1} host ` + strings.TrimPrefix(p.front.URL, "http://")
	if resp.StatusCode != http.StatusOK || got != want || resp.Header.Get("X-Owner") != "yes" {
		t.Errorf("forwarded: %d %q %v; want 200 %q", resp.StatusCode, got, resp.Header, want)
	}
}

func headerNames(h http.Header) []string {
	var names []string
	for k := range h {
		names = append(names, k)
	}
	return names
}

// An event stream reaches the client event by event: the owner writes
// its second event only once the client has read the first.
func TestForwardRelaysStream(t *testing.T) {
	first := make(chan struct{})
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		<-first
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	resp := p.post(t, "{}")
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event: %q, %v", line, err)
	}
	close(first)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Errorf("rest of the stream: %q, %v", rest, err)
	}
}

// A kept connection the owner closed while idle: it is given up, and the
// next request goes on a new one.
func TestForwardResendsOnClosedIdleConnection(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	if got := readAll(t, p.post(t, "{}")); got != "ok" {
		t.Fatalf("first: %q", got)
	}
	p.owner.CloseClientConnections() // the forwarder's kept connection too
	resp := p.post(t, "{}")
	if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != "ok" {
		t.Errorf("after the owner closed the idle connection: %d %q, want 200 ok", resp.StatusCode, got)
	}
	if n := p.served.Load(); n != 2 {
		t.Errorf("the owner served %d requests, want 2", n)
	}
}

// A kept connection that fails before the answer begins, with the owner
// still listening (as when it closed the connection as idle while the
// request was on its way): the request is sent again on a new one.
func TestForwardResendsOnKeptConnectionFailure(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	var drops atomic.Int32
	inner := p.owner.Config.Handler
	p.owner.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drops.Add(1) == 2 { // the second request, on the kept connection
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		inner.ServeHTTP(w, r)
	})
	readAll(t, p.post(t, "{}"))
	resp := p.post(t, "{}")
	if got := readAll(t, resp); resp.StatusCode != http.StatusOK || got != "ok" || drops.Load() != 3 {
		t.Errorf("after a kept connection failed: %d %q after %d requests, want 200 ok after 3", resp.StatusCode, got, drops.Load())
	}
}

// An owner that dies with a forwarded request, on a kept connection: the
// request may have run, so it answers 502, not the 404 of an owner found
// gone before anything was sent (after which a client sends it anew).
func TestForwardOwnerDiesWithRequest(t *testing.T) {
	var n atomic.Int32
	var p *pair
	p = newPair(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 2 {
			_ = p.owner.Listener.Close() // no new connection from now on
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			}
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	readAll(t, p.post(t, "{}"))
	resp := p.post(t, "{}")
	readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway || n.Load() != 2 {
		t.Errorf("an owner that died with the request: %d after %d runs, want 502 after 2", resp.StatusCode, n.Load())
	}
}

// An owner whose handler panics before answering answers 500: the
// request is not sent again on a new connection, where it would run a
// second time.
func TestForwardOwnerPanicsRunsOnce(t *testing.T) {
	var calls atomic.Int32
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			panic("owner failed")
		}
		_, _ = io.WriteString(w, "ok")
	})
	readAll(t, p.post(t, "{}")) // a kept connection, for the next request
	resp := p.post(t, "{}")
	readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError || p.served.Load() != 2 {
		t.Errorf("a panicking owner: %d after %d requests served, want 500 after 2", resp.StatusCode, p.served.Load())
	}
}

// An owner that drops the connection once it has the request, on a new
// connection: 502, and the request is not sent again.
func TestForwardOwnerFailsBeforeAnswer(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	resp := p.post(t, "{}")
	readAll(t, resp)
	if resp.StatusCode != http.StatusBadGateway || p.served.Load() != 1 {
		t.Errorf("an owner that failed: %d after %d requests served, want 502 after 1", resp.StatusCode, p.served.Load())
	}
}

// An owner that fails in the middle of its answer: the client's answer
// is cut, not ended as if whole.
func TestForwardOwnerFailsMidAnswer(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		rc := http.NewResponseController(w)
		_ = rc.Flush()
		if conn, _, err := rc.Hijack(); err == nil {
			_ = conn.Close()
		}
	})
	resp := p.post(t, "{}")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("a cut answer read as whole: %q", b)
	}
}

// An owner that is gone: the request is served locally.
func TestForwardOwnerGone(t *testing.T) {
	p := newPair(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	p.owner.Close()
	resp := p.post(t, "{}")
	if got := readAll(t, resp); resp.StatusCode != http.StatusNotFound || !strings.Contains(got, localAnswer) {
		t.Errorf("owner gone: %d %q, want 404 %q", resp.StatusCode, got, localAnswer)
	}
}
