package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Tests of the call pipeline: a started Mux whose one child, "lab", is a
// real MCP server (mcp-go's) served in process over streamable HTTP.

// callLab is a started Mux, its child's tools, and what the child saw.
type callLab struct {
	m   *Mux
	log *testsupport.SyncBuffer
	// calls counts the calls that reached the child.
	calls atomic.Int32
	// started gets the tag of each hold call once it has reached the
	// child; release[tag] lets it answer.
	started chan string
	mu      sync.Mutex
	release map[string]chan struct{}
}

// queued is how many calls wait for one of the lab child's slots.
func (l *callLab) queued() int64 { return l.m.p.Calls().Queued(l.m.list()[0].Alias()) }

// releaseCh returns the channel that lets hold call tag answer.
func (l *callLab) releaseCh(tag string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.release[tag]
	if !ok {
		ch = make(chan struct{})
		l.release[tag] = ch
	}
	return ch
}

func (l *callLab) tools(extra ...server.ServerTool) []server.ServerTool {
	return append([]server.ServerTool{
		{Tool: mcp.NewTool("hold", mcp.WithString("tag", mcp.Required())),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				l.calls.Add(1)
				tag := req.GetString("tag", "")
				release := l.releaseCh(tag)
				l.started <- tag
				select {
				case <-release:
					return mcp.NewToolResultText("released " + tag), nil
				case <-ctx.Done():
					return mcp.NewToolResultError("cancelled"), nil
				}
			}},
		{Tool: mcp.NewToolWithRawSchema("search", "", json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"filter":{"type":"object","properties":{"query":{"type":"string"}}}}}`)),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				l.calls.Add(1)
				return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
			}},
	}, extra...)
}

// startCallLab starts the child with tools and a Mux on it, configured
// with limitLines in [limits] and serverLines in [servers.lab], and stops
// both, checking that no goroutine outlives them, when t ends. Identities
// "reader" and "bob" may call every tool.
func startCallLab(t *testing.T, limitLines, serverLines string, extra ...server.ServerTool) *callLab {
	t.Helper()
	l := &callLab{log: &testsupport.SyncBuffer{}, started: make(chan string, 16), release: map[string]chan struct{}{}}
	l.m = startLab(t, labSpec{
		tools:       l.tools(extra...),
		allow:       []string{"reader", "bob"},
		muxLines:    `call_timeout = "30s"`,
		limitLines:  limitLines,
		serverLines: serverLines,
		log:         l.log,
		checkLeaks:  true,
	})
	return l
}

// call is one CallTool in flight.
type call struct {
	cancel context.CancelFunc
	done   chan pipeline.Result
}

func (l *callLab) start(identity, name, args string) *call {
	ctx, cancel := context.WithCancel(context.Background())
	c := &call{cancel: cancel, done: make(chan pipeline.Result, 1)}
	go func() { c.done <- l.m.CallTool(ctx, identity, name, json.RawMessage(args)) }()
	return c
}

func text(r pipeline.Result) string {
	res := r.ToolResult()
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// With max_in_flight = 1 and max_queued = 1, a third call is refused busy
// at once; a queued call whose caller gives up leaves the queue at once.
func TestBusy(t *testing.T) {
	l := startCallLab(t, "", "max_in_flight = 1\nmax_queued = 1")
	first := l.start("reader", "lab__hold", `{"tag":"first"}`)
	if tag := <-l.started; tag != "first" {
		t.Fatalf("%s started", tag)
	}
	queued := l.start("reader", "lab__hold", `{"tag":"queued"}`)
	testsupport.WaitFor(t, "the second call to queue", func() bool { return l.queued() == 1 })

	r := l.m.CallTool(context.Background(), "reader", "lab__hold", json.RawMessage(`{"tag":"third"}`))
	if r.Outcome != pipeline.OutcomeBusy || r.Decision != pipeline.DecisionAllowed || !r.Tool.IsError {
		t.Fatalf("third call: %+v", r)
	}
	if want := "server lab is busy: 1 calls in flight and 1 queued; try again later"; text(r) != want {
		t.Fatalf("busy message %q, want %q", text(r), want)
	}

	queued.cancel()
	if r := <-queued.done; r.Outcome != pipeline.OutcomeCancelled {
		t.Fatalf("cancelled queued call: %+v %q", r, text(r))
	}
	if n := l.queued(); n != 0 {
		t.Fatalf("%d calls still queued after the queued one was cancelled", n)
	}
	// Its place in the queue is free.
	next := l.start("reader", "lab__hold", `{"tag":"next"}`)
	testsupport.WaitFor(t, "the next call to queue", func() bool { return l.queued() == 1 })
	close(l.releaseCh("first"))
	if r := <-first.done; r.Outcome != pipeline.OutcomeOK {
		t.Fatalf("first call: %+v %q", r, text(r))
	}
	if tag := <-l.started; tag != "next" {
		t.Fatalf("%s started, want next", tag)
	}
	close(l.releaseCh("next"))
	if r := <-next.done; r.Outcome != pipeline.OutcomeOK {
		t.Fatalf("next call: %+v %q", r, text(r))
	}
	if n := l.calls.Load(); n != 2 {
		t.Fatalf("the child got %d calls, want 2 (the busy and the cancelled ones never reached it)", n)
	}
	if !strings.Contains(l.log.String(), `"outcome":"busy"`) {
		t.Error("no audit line with outcome busy")
	}
}

// A queued call is still bounded by its own deadline, and says it waited
// for a slot.
func TestQueuedCallTimesOut(t *testing.T) {
	l := startCallLab(t, "", "max_in_flight = 1")
	first := l.start("reader", "lab__hold", `{"tag":"first"}`)
	<-l.started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := l.m.CallTool(ctx, "reader", "lab__hold", json.RawMessage(`{"tag":"second"}`))
	if r.Outcome != pipeline.OutcomeTimeout || !strings.Contains(text(r), "waiting for one of server lab's 1 call slots; it was not sent") {
		t.Fatalf("queued call: %+v %q", r, text(r))
	}
	if n := l.queued(); n != 0 {
		t.Fatalf("%d calls queued after the queued one timed out", n)
	}
	close(l.releaseCh("first"))
	if r := <-first.done; r.Outcome != pipeline.OutcomeOK {
		t.Fatalf("first call: %+v %q", r, text(r))
	}
}

// rate_limit is per identity: a second call at once is refused, with the
// limit named, and another identity is not affected.
func TestRateLimited(t *testing.T) {
	// One call per 100s: the second is refused however slow the machine.
	l := startCallLab(t, "rate_limit = 0.01\nrate_burst = 1", "")
	args := json.RawMessage(`{"query":"x"}`)
	if r := l.m.CallTool(context.Background(), "reader", "lab__search", args); r.Outcome != pipeline.OutcomeOK {
		t.Fatalf("first call: %+v %q", r, text(r))
	}
	r := l.m.CallTool(context.Background(), "reader", "lab__search", args)
	if r.Outcome != pipeline.OutcomeRateLimited || !r.Tool.IsError {
		t.Fatalf("second call: %+v", r)
	}
	if want := `rate limit exceeded for identity "reader": at most 0.01 calls per second (bursts of 1); try again later`; text(r) != want {
		t.Fatalf("message %q, want %q", text(r), want)
	}
	if r := l.m.CallTool(context.Background(), "bob", "lab__search", args); r.Outcome != pipeline.OutcomeOK {
		t.Fatalf("another identity: %+v %q", r, text(r))
	}
	// Names outside the catalog are refused as before, not rate limited.
	if r := l.m.CallTool(context.Background(), "reader", "lab__nope", args); r.Decision != pipeline.DecisionUnknown {
		t.Fatalf("unknown name: %+v", r)
	}
	if n := l.calls.Load(); n != 2 {
		t.Fatalf("the child got %d calls, want 2", n)
	}
}

// Arguments with a duplicate key, or two keys that differ only in case, at
// the top or nested, never reach the child; others are forwarded byte for
// byte.
func TestDuplicateKeys(t *testing.T) {
	l := startCallLab(t, "", "")
	cases := []struct{ args, want string }{
		{`{"query":"public","query":"private"}`, `lab__search: arguments: duplicate key "query" at (root)`},
		{`{"filter":{"query":"a","query":"b"}}`, `lab__search: arguments: duplicate key "query" at /filter`},
		// A child that decodes into a struct matches names without regard
		// to case, and would take the second.
		{`{"query":"public","QUERY":"private"}`, `lab__search: arguments: keys "query" and "QUERY" differ only in case at (root)`},
		{`{"filter":{"query":"a","Query":"b"}}`, `lab__search: arguments: keys "query" and "Query" differ only in case at /filter`},
	}
	for _, c := range cases {
		r := l.m.CallTool(context.Background(), "reader", "lab__search", json.RawMessage(c.args))
		if r.Decision != pipeline.DecisionInvalid || r.Outcome != pipeline.OutcomeRefused || text(r) != c.want {
			t.Errorf("%s: %+v %q, want %q", c.args, r, text(r), c.want)
		}
	}
	if n := l.calls.Load(); n != 0 {
		t.Fatalf("the child got %d calls with duplicate keys", n)
	}
	// The JSON-RPC encoder compacts the arguments; nothing else changes.
	raw := `{"filter":{"query":"a"},"query":"1.000000000000000000001","n":1.000000000000000000001}`
	r := l.m.CallTool(context.Background(), "reader", "lab__search", json.RawMessage(raw))
	if r.Outcome != pipeline.OutcomeOK || text(r) != raw {
		t.Fatalf("forwarded %q, want %q (%+v)", text(r), raw, r)
	}
}

// A tool whose inputSchema is over max_schema_bytes or max_schema_depth is
// left out, and the log says why; the other tools stay.
func TestSchemaLimitsLeaveToolsOut(t *testing.T) {
	text := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("x"), nil
	}
	big := `{"type":"object","description":"` + strings.Repeat("x", 5000) + `"}`
	deep := `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"object","properties":{"d":{"type":"object"}}}}}}}}}`
	l := startCallLab(t, "max_schema_bytes = 4096\nmax_schema_depth = 8", "",
		server.ServerTool{Tool: mcp.NewToolWithRawSchema("big", "", json.RawMessage(big)), Handler: text},
		server.ServerTool{Tool: mcp.NewToolWithRawSchema("deep", "", json.RawMessage(deep)), Handler: text},
	)
	var names []string
	for _, ti := range l.m.Tools(upstream.WithIdentity(context.Background(), "reader")) {
		names = append(names, ti.Name)
	}
	if got := strings.Join(names, " "); got != "lab__hold lab__search" {
		t.Fatalf("tools %q, want the two within the limits", got)
	}
	log := l.log.String()
	for _, want := range []string{
		fmt.Sprintf(`"child_tool":"big","error":"inputSchema is %d bytes, more than max_schema_bytes (4KiB)","message":"tool left out: its inputSchema is larger than max_schema_bytes"`, len(big)),
		`"child_tool":"deep","error":"inputSchema nests objects and arrays 9 deep, more than max_schema_depth (8)","message":"tool left out: its inputSchema is nested deeper than max_schema_depth"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
}
