package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// httpConn is the raw streamable HTTP client of one run: each request is
// numbered (POST#3, GET#4) and recorded with the headers it carried; each
// response with its status, the headers a client acts on, and its body: a
// JSON body as one line, an event stream as one line per event's data.
// Responses are read as they arrive, each on a goroutine of its own that
// hands what it reads to the script's goroutine, which records it in
// arrival order.
type httpConn struct {
	w      *W
	url    string
	client *http.Client
	// session is the Mcp-Session-Id initialize got; sent on every request
	// after it.
	session string
	n       int
	events  chan httpEvent
	// open are the responses still being read, by label; gone, those
	// whose end was read; answers, the answer each response held.
	open    map[string]context.CancelFunc
	gone    map[string]bool
	answers map[string]*msg
	// readers are the goroutines reading responses; stop, closed at
	// cleanup, ends their hand-over.
	readers sync.WaitGroup
	stop    chan struct{}
}

type httpEventKind int

const (
	evHead httpEventKind = iota // the status and headers arrived
	evData                      // a JSON body, or one event of a stream
	evText                      // a body that is not JSON
	evEnd                       // the response ended
)

type httpEvent struct {
	label  string
	kind   httpEventKind
	status int
	header http.Header
	data   []byte
	sse    string // the event's own type and id, if not plain "message"
	err    error
}

func newHTTPConn(w *W, h *ts.HTTPMux) *httpConn {
	c := &httpConn{w: w, url: h.URL(), client: &http.Client{}, events: make(chan httpEvent, 4096),
		open: map[string]context.CancelFunc{}, gone: map[string]bool{}, answers: map[string]*msg{}, stop: make(chan struct{})}
	w.t.Cleanup(func() {
		close(c.stop)
		for _, cancel := range c.open {
			cancel()
		}
		c.readers.Wait()
		c.client.CloseIdleConnections()
	})
	return c
}

// hand gives the script's goroutine e, unless the run is over.
func (c *httpConn) hand(e httpEvent) {
	select {
	case c.events <- e:
	case <-c.stop:
	}
}

// headers is what a request of the run carries besides its body: the
// session once there is one (2025-11-25), and for 2026-07-28 the headers
// that revision requires, computed from the body as mcp-go's client does.
// extra replaces them, a "" value removing one.
func (c *httpConn) headers(method, body string, extra map[string]string) http.Header {
	h := http.Header{}
	if method == "POST" {
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
	} else if method == "GET" {
		h.Set("Accept", "text/event-stream")
	}
	if c.w.modern() {
		h.Set(mcp.HeaderProtocolVersion, v2026)
		var head struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal([]byte(body), &head) == nil && head.Method != "" {
			for k, v := range mcp.StandardHeaders(v2026, mcp.MCPMethod(head.Method), head.Params) {
				h.Set(k, v)
			}
		}
	} else if c.session != "" {
		h.Set(mcp.HeaderSessionID, c.session)
		h.Set(mcp.HeaderProtocolVersion, v2025)
	}
	for k, v := range extra {
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
	return h
}

// recorded are the request headers a transcript shows (the constant
// Content-Type and Accept only when a script changed them), in this order.
var recorded = []string{mcp.HeaderSessionID, mcp.HeaderProtocolVersion, mcp.HeaderMethod, mcp.HeaderName, "Origin", "Last-Event-Id"}

// answered are the response headers a transcript shows: those a client
// acts on, and every Mcp-* one.
var answered = []string{"Content-Type", mcp.HeaderSessionID, mcp.HeaderProtocolVersion, "Allow", "Retry-After", "Www-Authenticate", "Location"}

func (c *httpConn) recordRequest(label, body string, h http.Header, extra map[string]string) {
	var b strings.Builder
	b.WriteString("> " + label)
	names := slices.Clone(recorded)
	for k := range extra {
		if k = http.CanonicalHeaderKey(k); !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	for _, k := range names {
		k = http.CanonicalHeaderKey(k)
		if v := h.Get(k); v != "" {
			if k == mcp.HeaderSessionID {
				c.w.tr.variable("session", v)
			}
			fmt.Fprintf(&b, " [%s: %s]", k, v)
		} else if _, removed := extra[k]; removed {
			fmt.Fprintf(&b, " [%s: (none)]", k)
		}
	}
	if body != "" {
		b.WriteString(" " + body)
	}
	c.w.tr.add("%s", b.String())
}

func (c *httpConn) recordHead(e httpEvent) {
	var b strings.Builder
	fmt.Fprintf(&b, "< %s %d", e.label, e.status)
	names := slices.Clone(answered)
	for k := range e.header {
		if strings.HasPrefix(k, "Mcp-") && !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names[len(answered):])
	for _, k := range names {
		for _, v := range e.header.Values(k) {
			if k == mcp.HeaderSessionID {
				c.w.tr.variable("session", v)
			}
			fmt.Fprintf(&b, " [%s: %s]", k, v)
		}
	}
	c.w.tr.add("%s", b.String())
}

// start sends a request (method "POST" with body, "GET", "DELETE") with
// the run's headers, changed by extra, and returns its label; its response
// is read on a goroutine of its own.
func (c *httpConn) start(method, body string, extra map[string]string) string {
	c.n++
	label := fmt.Sprintf("%s#%d", method, c.n)
	h := c.headers(method, body, extra)
	c.recordRequest(label, body, h, extra)
	ctx, cancel := context.WithCancel(context.Background())
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		cancel()
		c.w.t.Fatal(err)
	}
	req.Header = h
	c.open[label] = cancel
	c.readers.Go(func() { c.read(label, req) })
	return label
}

// read does req and hands its response to the script's goroutine.
func (c *httpConn) read(label string, req *http.Request) {
	resp, err := c.client.Do(req)
	if err != nil {
		c.hand(httpEvent{label: label, kind: evEnd, err: err})
		return
	}
	defer resp.Body.Close()
	c.hand(httpEvent{label: label, kind: evHead, status: resp.StatusCode, header: resp.Header})
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		err = readEvents(resp.Body, func(data []byte, sse string) {
			c.hand(httpEvent{label: label, kind: evData, data: data, sse: sse})
		})
	} else {
		var body []byte
		body, err = io.ReadAll(resp.Body)
		switch {
		case len(body) == 0:
		case json.Valid(body):
			c.hand(httpEvent{label: label, kind: evData, data: bytes.TrimSuffix(body, []byte("\n"))})
		default:
			c.hand(httpEvent{label: label, kind: evText, data: body})
		}
	}
	c.hand(httpEvent{label: label, kind: evEnd, err: err})
}

// readEvents reads a text/event-stream, handing each event's data (lines
// joined) to got with its event type and id when they say more than a
// plain message.
func readEvents(r io.Reader, got func(data []byte, sse string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	var data [][]byte
	var typ, id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				var extra []string
				if typ != "" && typ != "message" {
					extra = append(extra, "event="+typ)
				}
				if id != "" {
					extra = append(extra, "id="+id)
				}
				got(bytes.Join(data, []byte("\n")), strings.Join(extra, " "))
			}
			data, typ, id = nil, "", ""
		case strings.HasPrefix(line, "data:"):
			data = append(data, []byte(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")))
		case strings.HasPrefix(line, "event:"):
			typ = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		}
	}
	return sc.Err()
}

// next returns the next message of any response, or the end of one,
// recording statuses, headers, bodies that are not JSON and ends as they
// come.
func (c *httpConn) next(what string) incoming {
	c.w.t.Helper()
	for {
		var e httpEvent
		select {
		case e = <-c.events:
		case <-time.After(ts.Wait):
			c.w.t.Fatalf("nothing came over HTTP while waiting for %s", what)
		}
		switch e.kind {
		case evData:
			if m := parseMsg(e.data); m.isAnswer() {
				c.answers[e.label] = m
			}
			label := e.label
			if e.sse != "" {
				label += " " + e.sse
			}
			return incoming{label: label, raw: e.data}
		case evEnd:
			c.record(e)
			return incoming{label: e.label, end: true}
		default:
			c.record(e)
		}
	}
}

func (c *httpConn) record(e httpEvent) {
	switch e.kind {
	case evHead:
		c.recordHead(e)
		if e.status == http.StatusOK && !c.w.modern() && c.session == "" {
			c.session = e.header.Get(mcp.HeaderSessionID)
		}
	case evData:
		c.w.received(e.label, e.data)
	case evText:
		c.w.tr.add("< %s %q", e.label, e.data)
	case evEnd:
		delete(c.open, e.label)
		c.gone[e.label] = true
		switch {
		case e.err != nil && !strings.Contains(e.err.Error(), "context canceled"):
			c.w.tr.add("< %s ended: %v", e.label, e.err)
		case !strings.HasPrefix(e.label, "POST"):
			c.w.tr.add("< %s ended", e.label)
		}
	}
}

// inline sends a request whose response the script waits for at once,
// before reading anything else: the client's answers to mcpmux's requests
// and notifications, whose responses say only that they were accepted.
func (c *httpConn) inline(method, body string, extra map[string]string) {
	c.w.t.Helper()
	c.n++
	label := fmt.Sprintf("%s#%d", method, c.n)
	h := c.headers(method, body, extra)
	c.recordRequest(label, body, h, extra)
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		c.w.t.Fatal(err)
	}
	req.Header = h
	resp, err := c.client.Do(req)
	if err != nil {
		c.w.t.Fatalf("%s: %v", label, err)
	}
	defer resp.Body.Close()
	c.record(httpEvent{label: label, kind: evHead, status: resp.StatusCode, header: resp.Header})
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.w.t.Fatalf("%s: reading the body: %v", label, err)
	}
	switch {
	case len(b) == 0:
	case json.Valid(b):
		c.record(httpEvent{label: label, kind: evData, data: bytes.TrimSuffix(b, []byte("\n"))})
	default:
		c.record(httpEvent{label: label, kind: evText, data: b})
	}
}

// awaitHead reads until label's status and headers came, or its end.
func (c *httpConn) awaitHead(label string) {
	c.w.t.Helper()
	for {
		var e httpEvent
		select {
		case e = <-c.events:
		case <-time.After(ts.Wait):
			c.w.t.Fatalf("no response to %s", label)
		}
		if e.kind == evData {
			c.w.received(e.label, e.data)
		} else {
			c.record(e)
		}
		if e.label == label && e.kind != evData {
			return
		}
	}
}

// finish reads until p's response has ended and returns the answer it
// held, if any.
func (c *httpConn) finish(p pending) *msg {
	c.w.t.Helper()
	for !c.gone[p.label] {
		if in := c.next("the end of " + p.label); !in.end {
			c.w.received(in.label, in.raw)
		}
	}
	return c.answers[p.label]
}

// close ends label's response from the client's side (a stream it stops
// listening to, a request it gives up) and reads until it has ended.
func (c *httpConn) close(label string) {
	c.w.t.Helper()
	cancel, ok := c.open[label]
	if !ok {
		return
	}
	c.w.tr.add("> %s closed", label)
	cancel()
	for !c.gone[label] {
		if in := c.next("the end of " + label); !in.end {
			c.w.received(in.label, in.raw)
		}
	}
}

// end deletes a 2025-11-25 session and closes every response still open.
func (c *httpConn) end() {
	c.w.t.Helper()
	if c.session != "" {
		c.inline("DELETE", "", nil)
	}
	for _, label := range slices.Sorted(mapKeys(c.open)) {
		c.close(label)
	}
}
