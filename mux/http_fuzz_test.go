package mux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// httpLab is the HTTP upstream of a fuzz lab, with one session opened by
// initialize.
type httpLab struct {
	url     string
	session string
}

func startHTTPLab(f *testing.F) *httpLab {
	f.Helper()
	m := startFuzzLab(f)
	_, url := serveLab(f, m, edge.HTTPOptions{Path: "/mcp", SessionIdleTimeout: time.Hour, Limits: m.cfg.Limits},
		func(*http.Request) string { return fuzzIdentity })
	h := &httpLab{url: url}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`
	resp, body, err := h.post(context.Background(), []byte(init), false)
	if err != nil || resp.StatusCode != http.StatusOK {
		f.Fatalf("initialize: %v %v %s", err, resp, body)
	}
	h.session = resp.Header.Get(server.HeaderKeySessionID)
	if h.session == "" {
		f.Fatalf("initialize opened no session: %s", body)
	}
	resp, body, err = h.post(context.Background(), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), true)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		f.Fatalf("notifications/initialized: %v %v %s", err, resp, body)
	}
	return h
}

// post sends body as a client would, in the lab's session or in none.
func (h *httpLab) post(ctx context.Context, body []byte, inSession bool) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if inSession {
		req.Header.Set(server.HeaderKeySessionID, h.session)
		req.Header.Set(server.HeaderKeyProtocolVersion, "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}

// opensStream reports whether body asks for a stream that stays open for as
// long as the session does.
func opensStream(body []byte) bool {
	var one struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &one) == nil {
		return one.Method == string(mcp.MethodSubscriptionsListen)
	}
	var batch []struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if m.Method == string(mcp.MethodSubscriptionsListen) {
				return true
			}
		}
	}
	return false
}

// FuzzHTTPBody posts a fuzzed body to the streamable HTTP upstream, in the
// open session or in none, and checks the answer: never a server error, a
// JSON or event-stream body made of well-formed JSON-RPC messages, and the
// session still answering a ping afterwards.
func FuzzHTTPBody(f *testing.F) {
	h := startHTTPLab(f)
	f.Fuzz(func(t *testing.T, body []byte, inSession bool) {
		if len(body) > 1<<20 {
			return // the body limit has its own tests
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if opensStream(body) {
			// The stream stays open: check only that it opened, or was
			// refused, cleanly.
			sctx, stop := context.WithTimeout(ctx, 2*time.Second)
			resp, _, err := h.post(sctx, body, inSession)
			stop()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("listening request: %v", err)
			}
			if resp != nil && resp.StatusCode >= 500 {
				t.Fatalf("listening request answered %s", resp.Status)
			}
		} else {
			resp, out, err := h.post(ctx, body, inSession)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			checkHTTPAnswer(t, resp, out)
		}
		resp, out, err := h.post(ctx, []byte(`{"jsonrpc":"2.0","id":"alive","method":"ping"}`), true)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) {
			t.Fatalf("the upstream stopped serving its session: %v %v %s", err, resp, out)
		}
	})
}

// checkHTTPAnswer fails t unless resp is a well-formed answer to a POST.
func checkHTTPAnswer(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode < 200 || resp.StatusCode >= 500 {
		t.Fatalf("answered %s: %s", resp.Status, body)
	}
	if resp.StatusCode >= 300 || resp.StatusCode == http.StatusAccepted {
		return // an error text, or nothing to say (notifications, answers)
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		checkJSONRPCBody(t, body)
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				checkJSONRPCBody(t, []byte(strings.TrimSpace(data)))
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("event stream: %v", err)
		}
	default:
		t.Fatalf("answered %s with Content-Type %q: %s", resp.Status, ct, body)
	}
}

// checkJSONRPCBody checks one message, or a batch of them.
func checkJSONRPCBody(t *testing.T, body []byte) {
	t.Helper()
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			checkMessage(t, m)
		}
		return
	}
	checkMessage(t, body)
}
