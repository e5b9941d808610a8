package testsupport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Front is an HTTP server standing in front of a remote child where a
// proxy, a load balancer or the child's own web framework would: it passes
// every request on to the child and records it, except the tools/call
// requests for the tools it is told to answer itself (Answer). The legacy
// SSE transport works through it: the endpoint the child announces on its
// event stream is rewritten to the front's own address.
//
// A Front started by StartTrap passes nothing on: it records what reaches
// it and answers every JSON-RPC request with a tool result naming it
// (TrapText), so that a request it should never have had shows in the
// caller's answer as well as in Requests.
type Front struct {
	// URL is the front's base URL, http://127.0.0.1:PORT.
	URL string

	target string                 // the child's host:port; "" for a trap
	proxy  *httputil.ReverseProxy // nil for a trap

	mu      sync.Mutex
	seen    []FrontRequest
	answers map[string]http.HandlerFunc // by tool name
}

// FrontRequest is one request a Front received.
type FrontRequest struct {
	HTTPMethod string
	Path       string // with its query
	Header     http.Header
	// Method is the JSON-RPC method of a POST's body ("" if it has none),
	// ID its id as sent (nil if it has none); Tool is the tool's name for
	// a tools/call.
	Method string
	ID     json.RawMessage
	Tool   string
}

// TrapText is the text of the tool result a trap answers with.
const TrapText = "answered by the trap, which no request should reach"

// StartFront starts a Front passing requests on to the child listening on
// target (host:port); it is closed when the test ends.
func StartFront(t testing.TB, target string) *Front {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	f := &Front{target: target, answers: map[string]http.HandlerFunc{}}
	f.proxy = httputil.NewSingleHostReverseProxy(u)
	f.proxy.FlushInterval = -1 // event streams go on as they come
	f.proxy.ModifyResponse = f.rewriteEndpoint
	f.start(t)
	return f
}

// StartTrap starts a Front that passes nothing on; it is closed when the
// test ends.
func StartTrap(t testing.TB) *Front {
	t.Helper()
	f := &Front{answers: map[string]http.HandlerFunc{}}
	f.start(t)
	return f
}

func (f *Front) start(t testing.TB) {
	srv := httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = srv.URL
	t.Cleanup(func() {
		srv.CloseClientConnections() // event streams never end by themselves
		srv.Close()
	})
}

// Answer has the front answer every tools/call of tool with h instead of
// passing it on; nil passes them on again.
func (f *Front) Answer(tool string, h http.HandlerFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h == nil {
		delete(f.answers, tool)
	} else {
		f.answers[tool] = h
	}
}

// Requests returns every request received so far, in order.
func (f *Front) Requests() []FrontRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FrontRequest(nil), f.seen...)
}

// Count returns how many requests received so far had JSON-RPC method
// method.
func (f *Front) Count(method string) int {
	n := 0
	for _, r := range f.Requests() {
		if r.Method == method {
			n++
		}
	}
	return n
}

func (f *Front) serve(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &msg) // a batch or no JSON: recorded without a method
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rec := FrontRequest{HTTPMethod: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Method: msg.Method, ID: msg.ID}
	if msg.Method == "tools/call" {
		rec.Tool = msg.Params.Name
	}
	f.mu.Lock()
	f.seen = append(f.seen, rec)
	h := f.answers[rec.Tool]
	f.mu.Unlock()
	switch {
	case h != nil:
		h(w, r)
	case f.proxy != nil:
		f.proxy.ServeHTTP(w, r)
	case msg.ID != nil && msg.Method != "":
		w.Header().Set("Content-Type", "application/json")
		res, _ := json.Marshal(map[string]any{
			"jsonrpc": "2.0", "id": msg.ID,
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": TrapText}}},
		})
		_, _ = w.Write(res)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// rewriteEndpoint has the endpoint event of a legacy SSE stream name the
// front instead of the child, which names its own address.
func (f *Front) rewriteEndpoint(resp *http.Response) error {
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return nil
	}
	resp.Body = &endpointRewriter{rc: resp.Body, br: bufio.NewReader(resp.Body), from: "http://" + f.target, to: f.URL}
	return nil
}

// endpointRewriter replaces from with to in the lines of a stream up to its
// first empty one (the first event), and passes the rest on as it is.
type endpointRewriter struct {
	rc       io.ReadCloser
	br       *bufio.Reader
	from, to string
	pending  []byte
	passing  bool // the first event is over
}

func (e *endpointRewriter) Read(p []byte) (int, error) {
	for len(e.pending) == 0 {
		if e.passing {
			return e.br.Read(p)
		}
		line, err := e.br.ReadString('\n')
		if strings.TrimRight(line, "\r\n") == "" && err == nil {
			e.passing = true
		}
		e.pending = []byte(strings.ReplaceAll(line, e.from, e.to))
		if err != nil {
			if len(e.pending) == 0 {
				return 0, err
			}
			e.passing = true // what is left is passed on, then err
		}
	}
	n := copy(p, e.pending)
	e.pending = e.pending[n:]
	return n, nil
}

func (e *endpointRewriter) Close() error { return e.rc.Close() }
