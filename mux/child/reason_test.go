package child

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/child/link"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// Tests of the reasons mux gives its children's failures: each is made by a
// real start attempt, or a real session lost, against a real process or a
// real HTTP server that misbehaves in one way.

// rpcRequest is what the fake remote child reads of a request.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// writeAnswer writes a JSON-RPC result for id.
func writeAnswer(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

const initResult = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`

// remoteChild serves MCP over streamable HTTP as far as a start needs:
// initialize, notifications and pings are answered properly, and every
// other request by other, which by default answers tools/list with one
// page of no tools. It returns the child's URL.
func remoteChild(t *testing.T, other func(w http.ResponseWriter, r *http.Request, req rpcRequest)) string {
	t.Helper()
	return serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req rpcRequest
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch {
		case req.ID == nil:
			w.WriteHeader(http.StatusAccepted)
		case req.Method == "initialize":
			writeAnswer(w, req.ID, initResult)
		case other != nil:
			other(w, r, req)
		case req.Method == "ping":
			writeAnswer(w, req.ID, `{}`)
		default:
			writeAnswer(w, req.ID, `{"tools":[]}`)
		}
	})
}

// serveHTTP serves h until the test ends, and returns its MCP endpoint.
// Connections are closed first, so that a handler waiting for its request
// to end returns.
func serveHTTP(t *testing.T, h http.HandlerFunc) string {
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// failAll answers every request, initialize too, with status code.
func failAll(t *testing.T, code int) string {
	t.Helper()
	return serveHTTP(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "SECRET body", code)
	})
}

// hangUp closes the connection of every request it gets without an answer;
// with reset, with an RST.
func hangUp(w http.ResponseWriter, reset bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// testChild returns a child configured with serverLines in [servers.x] and
// limitLines in [limits], run by a testHost; the test starts it itself.
func testChild(t *testing.T, serverLines, limitLines string) *Server {
	t.Helper()
	dir := t.TempDir()
	src := "[mux]\npolicy_dir = \".\"\n\n[limits]\n" + limitLines + "\n\n[servers.x]\n" + serverLines + "\n"
	cfg, err := config.Parse(filepath.Join(dir, "mcpmux.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return New(newTestHost(t), Env{Config: cfg, Log: zerolog.Nop()}, cfg.Servers[0])
}

func TestStartFailureReasons(t *testing.T) {
	_, before := testsupport.Goroutines()
	t.Cleanup(func() { testsupport.CheckGoroutines(t, before) })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + closed.Addr().String() + "/mcp"
	_ = closed.Close()

	for _, c := range []struct {
		name        string
		server      func(t *testing.T) string // [servers.x] lines
		limits      string
		want        link.FailureReason
		wantPrefix  string // the error's text, as it always was
		wantContain string
	}{
		{name: "missing command", want: link.ReasonStartFailed, wantPrefix: "server x: exec: ", wantContain: "/nonexistent/mcp-server",
			server: func(*testing.T) string { return `command = "/nonexistent/mcp-server"` }},
		{name: "exits", want: link.ReasonExited, wantPrefix: "server x: initialize: process exit status 3",
			server: func(*testing.T) string { return `command = "/bin/sh"` + "\n" + `args = ["-c", "exit 3"]` }},
		{name: "killed", want: link.ReasonExited, wantPrefix: "server x: initialize: process signal: killed",
			server: func(*testing.T) string { return `command = "/bin/sh"` + "\n" + `args = ["-c", "kill -KILL $$"]` }},
		{name: "stdout closed", want: link.ReasonProtocolBroken, wantPrefix: "server x: initialize: process its stdout ended or broke the protocol",
			server: func(*testing.T) string {
				return `command = "/bin/sh"` + "\n" + `args = ["-c", "exec >&-; exec sleep 60"]` + "\n" + `startup_timeout = "20s"`
			}},
		{name: "silent process", want: link.NotReadyWithin(300 * time.Millisecond),
			wantPrefix: "server x: initialize: process request failed: transport error: context deadline exceeded",
			server: func(*testing.T) string {
				return `command = "/bin/sh"` + "\n" + `args = ["-c", "exec sleep 60"]` + "\n" + `startup_timeout = "300ms"`
			}},
		{name: "silent remote", want: link.NotReadyWithin(300 * time.Millisecond), wantPrefix: "server x: initialize: no answer within 300ms",
			server: func(t *testing.T) string {
				return `url = "` + serveHTTP(t, func(_ http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body) // so that a closed connection ends r's context
					<-r.Context().Done()
				}) + `"` + "\n" + `startup_timeout = "300ms"`
			}},
		{name: "refused", want: link.ReasonConnectionRefused, wantPrefix: "server x: initialize: ", wantContain: "connection refused",
			server: func(*testing.T) string { return `url = "` + closedURL + `"` }},
		{name: "dns", want: link.ReasonDNS, wantPrefix: "server x: initialize: ",
			server: func(*testing.T) string { return `url = "http://no-such-host.invalid/mcp"` }},
		{name: "reset", want: link.ReasonConnectionReset, wantPrefix: "server x: initialize: ", wantContain: "reset",
			server: func(t *testing.T) string {
				return `url = "` + serveHTTP(t, func(w http.ResponseWriter, _ *http.Request) { hangUp(w, true) }) + `"`
			}},
		{name: "401", want: link.ReasonHTTP401, wantPrefix: "server x: initialize: ",
			server: func(t *testing.T) string { return `url = "` + failAll(t, http.StatusUnauthorized) + `"` }},
		{name: "404 to initialize", want: link.ReasonHTTP4xx, wantPrefix: "server x: initialize: ",
			server: func(t *testing.T) string { return `url = "` + failAll(t, http.StatusNotFound) + `"` }},
		{name: "403 to tools/list", want: link.ReasonHTTP4xx, wantPrefix: "server x: tools/list: ", wantContain: "status 403",
			server: func(t *testing.T) string {
				return `url = "` + remoteChild(t, func(w http.ResponseWriter, _ *http.Request, _ rpcRequest) {
					http.Error(w, "SECRET", http.StatusForbidden)
				}) + `"`
			}},
		{name: "502", want: link.ReasonHTTP5xx, wantPrefix: "server x: initialize: ", wantContain: "status 502",
			server: func(t *testing.T) string { return `url = "` + failAll(t, http.StatusBadGateway) + `"` }},
		{name: "redirect", want: link.ReasonHTTP3xx, wantPrefix: "server x: initialize: answered with HTTP status 307, a redirect, which mcpmux does not follow",
			server: func(t *testing.T) string {
				target := remoteChild(t, nil) // a child that would start
				return `url = "` + serveHTTP(t, func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, target+"?SECRET", http.StatusTemporaryRedirect)
				}) + `"`
			}},
		{name: "hung up", want: link.ReasonInitializeFailed, wantPrefix: "server x: initialize: ",
			server: func(t *testing.T) string {
				return `url = "` + serveHTTP(t, func(w http.ResponseWriter, _ *http.Request) { hangUp(w, false) }) + `"`
			}},
		{name: "bad page", want: link.ReasonToolsListFailed, wantPrefix: "server x: tools/list: decode page 1: ",
			server: func(t *testing.T) string {
				return `url = "` + remoteChild(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
					writeAnswer(w, req.ID, `"SECRET"`)
				}) + `"`
			}},
		{name: "too many pages", want: link.ReasonToolsListFailed, limits: "max_catalog_pages = 2",
			wantPrefix: "server x: tools/list: the tool list has more than max_catalog_pages (2) pages",
			server: func(t *testing.T) string {
				var pages atomic.Int32
				return `url = "` + remoteChild(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
					writeAnswer(w, req.ID, fmt.Sprintf(`{"tools":[],"nextCursor":"c%d"}`, pages.Add(1)))
				}) + `"`
			}},
		{name: "answer too large", want: link.ReasonMessageTooLarge, limits: `max_message_bytes = "4KiB"`,
			wantPrefix: "server x: tools/list: its answer to tools/list exceeded max_message_bytes (4KiB)",
			server: func(t *testing.T) string {
				return `url = "` + remoteChild(t, func(w http.ResponseWriter, _ *http.Request, req rpcRequest) {
					writeAnswer(w, req.ID, `{"tools":[],"pad":"`+strings.Repeat("x", 8<<10)+`"}`)
				}) + `"`
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ch := testChild(t, c.server(t), c.limits)
			sess, _, err := ch.start(context.Background())
			if err == nil {
				ch.stopSession(sess)
				t.Fatal("the start succeeded")
			}
			if got := link.ReasonOf(err); got != c.want {
				t.Errorf("ReasonOf(%q) = %q, want %q", err, got, c.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, c.wantPrefix) || !strings.Contains(msg, c.wantContain) {
				t.Errorf("error %q, want it to start with %q and contain %q", msg, c.wantPrefix, c.wantContain)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q holds what the server wrote", err)
			}
		})
	}
}

// A session lost after it was ready gives its reason to the error the child
// shows while it restarts.
func TestRestartReasons(t *testing.T) {
	_, before := testsupport.Goroutines()
	t.Cleanup(func() { testsupport.CheckGoroutines(t, before) })
	for _, c := range []struct {
		name string
		// server is the remote child, given whether requests after the
		// start are to fail.
		other func(w http.ResponseWriter, r *http.Request, req rpcRequest, failing bool)
		// lose makes the session lost.
		lose func(t *testing.T, sess *Session)
		want link.FailureReason
		why  string
	}{
		{name: "pings", want: link.ReasonPingsFailed, why: "3 pings in a row failed",
			other: func(w http.ResponseWriter, _ *http.Request, req rpcRequest, failing bool) {
				if failing && req.Method == "ping" {
					http.Error(w, "SECRET", http.StatusInternalServerError)
					return
				}
				writeAnswer(w, req.ID, `{"tools":[]}`)
			},
			lose: func(t *testing.T, sess *Session) { <-sess.lost }},
		{name: "hung up", want: link.ReasonConnectionLost, why: "request failed: ",
			other: func(w http.ResponseWriter, _ *http.Request, req rpcRequest, failing bool) {
				if failing {
					hangUp(w, false)
					return
				}
				writeAnswer(w, req.ID, `{"tools":[]}`)
			},
			lose: func(t *testing.T, sess *Session) {
				_, err := sess.Request(context.Background(), nil, "tools/list", nil)
				if err == nil || !sess.Failed(context.Background(), err) {
					t.Fatalf("the request after the hang-up: %v", err)
				}
			}},
		{name: "timed out", want: link.ReasonTimedOut, why: "request failed: ",
			other: func(w http.ResponseWriter, r *http.Request, req rpcRequest, failing bool) {
				if failing {
					<-r.Context().Done()
					return
				}
				writeAnswer(w, req.ID, `{"tools":[]}`)
			},
			lose: func(t *testing.T, sess *Session) {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				_, err := sess.Request(ctx, nil, "tools/list", nil)
				if err == nil || !sess.Failed(ctx, err) {
					t.Fatalf("the request that ran out of time: %v", err)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			failing := make(chan struct{})
			url := remoteChild(t, func(w http.ResponseWriter, r *http.Request, req rpcRequest) {
				select {
				case <-failing:
					c.other(w, r, req, true)
				default:
					c.other(w, r, req, false)
				}
			})
			ch := testChild(t, `url = "`+url+`"`+"\n"+`ping_interval = "20ms"`, "")
			sess, _, err := ch.start(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer ch.teardown(sess)
			close(failing)
			c.lose(t, sess)
			err = restartErr(sess)
			if got := link.ReasonOf(err); got != c.want {
				t.Errorf("ReasonOf(%q) = %q, want %q", err, got, c.want)
			}
			if want := "restarting after it exited (" + c.why; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q, want it to start with %q", err, want)
			}
		})
	}
}

// The kind of a child's failure comes from where it was made, never from
// its text: mux's own wording, reworded or quoted by anyone, tells nothing.
func TestReasonOfIgnoresWording(t *testing.T) {
	for _, msg := range []string{
		"server x: initialize: process exit status 1",
		"restarting after it exited (3 pings in a row failed)",
		"server x: tools/list: no answer within 10s",
		"server x: initialize: connection lost: EOF",
		"server x: start: its answer to tools/list exceeded max_message_bytes (4KiB)",
	} {
		if got := link.ReasonOf(errors.New(msg)); got != link.ReasonError {
			t.Errorf("ReasonOf(%q) = %q, want %q", msg, got, link.ReasonError)
		}
	}
	if got := link.ReasonOf(nil); got != "" {
		t.Errorf("ReasonOf(nil) = %q", got)
	}
	// Wrapped further, a reason stays.
	err := fmt.Errorf("server x: %w", fmt.Errorf("its answer to %s %w (4KiB)", "tools/list", link.ErrMessageTooLarge))
	if got := link.ReasonOf(err); got != link.ReasonMessageTooLarge || !errors.Is(err, link.ErrMessageTooLarge) {
		t.Errorf("ReasonOf(%q) = %q, want %q", err, got, link.ReasonMessageTooLarge)
	}
}
