package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// The trace of requests at the HTTP edge, to a remote child: the trace
// context of the client's HTTP headers and _meta, the session's
// attributes, and the context the child gets in its own HTTP headers.

// headerChild is a remote child, a real mcp-go server with the tool meta
// (its answer the _meta its call came with), recording the traceparent
// header of every HTTP request it gets.
type headerChild struct {
	mu      sync.Mutex
	parents []string
}

// seen reports whether the child got traceparent in an HTTP header.
func (c *headerChild) seen(traceparent string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.parents {
		if p == traceparent {
			return true
		}
	}
	return false
}

// serveHeaderChild serves a headerChild over transport ("sse" or
// streamable HTTP) until t ends, and returns it and its MCP endpoint.
func serveHeaderChild(t *testing.T, transport string) (*headerChild, string) {
	t.Helper()
	srv := server.NewMCPServer("remote", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("meta"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(req.Params.Meta)
		if err != nil {
			return nil, err
		}
		return mcp.NewToolResultText(string(b)), nil
	})
	srv.AddTool(mcp.NewTool("redirect"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("not redirected"), nil
	})
	c := &headerChild{}
	var inner http.Handler
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.Header.Get("traceparent"); p != "" {
			c.mu.Lock()
			c.parents = append(c.parents, p)
			c.mu.Unlock()
		}
		// A call of redirect is answered with a redirect, which mcpmux
		// logs and does not follow.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"name":"redirect"`)) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	var shutdown func(context.Context) error
	endpoint := hs.URL + "/mcp"
	if transport == "sse" {
		sse := server.NewSSEServer(srv, server.WithBaseURL(hs.URL))
		inner, shutdown, endpoint = sse, sse.Shutdown, hs.URL+"/sse"
	} else {
		st := server.NewStreamableHTTPServer(srv, server.WithStateful(true))
		inner, shutdown = st, st.Shutdown
	}
	t.Cleanup(func() {
		_ = shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	return c, endpoint
}

// tracedHTTP is a Mux tracing into an in-memory exporter, its one child
// "lab" a headerChild over transport, served at its HTTP upstream.
func tracedHTTP(t *testing.T, transport string, log io.Writer) (*httpMux, *headerChild, *tracetest.InMemoryExporter) {
	t.Helper()
	child, endpoint := serveHeaderChild(t, transport)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := telemetry.New(tp)
	m := runMuxWith(t, map[string]string{"dev": `allow = ["*"]`}, log, Options{Tracing: tr}, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\ntransport = %q\n", policies, endpoint, transport)
	})
	up, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "dev" })
	return &httpMux{m: m, up: up, url: url}, child, exp
}

// callWithHeaders calls lab__meta in session sid, with the HTTP headers
// h and _meta meta ("" for none); it returns the answer's body.
func (h *httpMux) callWithHeaders(t *testing.T, sid string, hdr map[string]string, meta string) string {
	t.Helper()
	return h.callToolWithHeaders(t, "lab__meta", sid, hdr, meta)
}

// callToolWithHeaders is callWithHeaders of the tool name.
func (h *httpMux) callToolWithHeaders(t *testing.T, name, sid string, hdr map[string]string, meta string) string {
	t.Helper()
	params := `{"name":"` + name + `","arguments":{}`
	if meta != "" {
		params += `,"_meta":` + meta
	}
	code, b := h.postWithHeaders(t, sid, `{"jsonrpc":"2.0","id":"h1","method":"tools/call","params":`+params+`}}`, hdr)
	if code != http.StatusOK || !strings.Contains(b, `"result"`) {
		t.Fatalf("call: %d %s", code, b)
	}
	return b
}

// postWithHeaders POSTs body in session sid ("" for none, and no protocol
// version header), with the HTTP headers hdr; it returns the status and
// the answer's body.
func (h *httpMux) postWithHeaders(t *testing.T, sid, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set(server.HeaderKeySessionID, sid)
		req.Header.Set(server.HeaderKeyProtocolVersion, "2025-11-25")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestTraceAtTheHTTPEdge(t *testing.T) {
	for _, transport := range []string{"streamable", "sse"} {
		t.Run("child over "+transport, func(t *testing.T) {
			h, child, exp := tracedHTTP(t, transport, nil)
			sid, code, text := h.open(t, "dev")
			if sid == "" {
				t.Fatalf("initialize: %d %s", code, text)
			}

			// The HTTP headers' trace context: the server span's parent,
			// its tracestate passed on.
			exp.Reset()
			body := h.callWithHeaders(t, sid, map[string]string{"traceparent": clientParent, "tracestate": "vendor=x"}, "")
			srv := spanNamed(t, exp, "tools/call lab__meta")
			cli := spanNamed(t, exp, "tools/call meta")
			if srv.Parent.TraceID().String() != clientTraceID || srv.Parent.SpanID().String() != clientSpanID || !srv.Parent.IsRemote() {
				t.Errorf("server span's parent %v, want the traceparent header's span", srv.Parent)
			}
			if got := srv.SpanContext.TraceState().Get("vendor"); got != "x" {
				t.Errorf("server span's tracestate vendor = %q, want the header's", got)
			}
			wantAttrs(t, srv, map[string]string{"mcp.session.id": sid, "mcp.protocol.version": "2025-11-25",
				"network.transport": "tcp", "mcpmux.identity": "dev", "jsonrpc.request.id": "h1"})
			wantAttrs(t, cli, map[string]string{"network.transport": "tcp", "mcpmux.server.alias": "lab"})
			toChild := "00-" + clientTraceID + "-" + cli.SpanContext.SpanID().String() + "-01"
			if !child.seen(toChild) {
				t.Errorf("the child's HTTP requests carried traceparent %q, want %s among them", child.parents, toChild)
			}
			if !strings.Contains(body, `\"traceparent\":\"`+toChild+`\"`) || !strings.Contains(body, `\"tracestate\":\"vendor=x\"`) {
				t.Errorf("the child's _meta, in %s, lacks traceparent %s and tracestate vendor=x", body, toChild)
			}

			// _meta's trace context wins over the header's.
			exp.Reset()
			const metaTrace, metaSpan = "11111111111111111111111111111111", "2222222222222222"
			h.callWithHeaders(t, sid, map[string]string{"traceparent": clientParent}, `{"traceparent":"00-`+metaTrace+`-`+metaSpan+`-01"}`)
			srv = spanNamed(t, exp, "tools/call lab__meta")
			if srv.Parent.TraceID().String() != metaTrace || srv.Parent.SpanID().String() != metaSpan {
				t.Errorf("server span's parent %v, want _meta's %s-%s over the header's", srv.Parent, metaTrace, metaSpan)
			}
		})
	}
}

// TestTraceOfALogLine: a line logged while a request is handled (here the
// warning for a remote child's redirect, which the child's HTTP transport
// writes) carries the ids of the request's trace and of the span then
// active, the client span of the call.
func TestTraceOfALogLine(t *testing.T) {
	log := &testsupport.SyncBuffer{}
	h, _, exp := tracedHTTP(t, "streamable", log)
	sid, code, text := h.open(t, "dev")
	if sid == "" {
		t.Fatalf("initialize: %d %s", code, text)
	}
	h.callToolWithHeaders(t, "lab__redirect", sid, map[string]string{"traceparent": clientParent}, "")
	cli := spanNamed(t, exp, "tools/call redirect")
	var found bool
	for _, line := range strings.Split(log.String(), "\n") {
		if !strings.Contains(line, "server answered with a redirect") {
			continue
		}
		found = true
		if !strings.Contains(line, `"trace_id":"`+clientTraceID+`"`) || !strings.Contains(line, `"span_id":"`+cli.SpanContext.SpanID().String()+`"`) {
			t.Errorf("the redirect's line %s, want trace_id %s and the client span's span_id %s", line, clientTraceID, cli.SpanContext.SpanID())
		}
	}
	if !found {
		t.Fatalf("no line about the redirect in:\n%s", log.String())
	}
}
