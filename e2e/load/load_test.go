package load

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

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// caller is what both a stdio client and an HTTP client offer.
type caller interface {
	CallCtx(ctx context.Context, name string, args any) (*mcp.CallToolResult, error)
}

// stdioCaller adapts the stdio Mux to caller.
type stdioCaller struct{ m *ts.Mux }

func (s stdioCaller) CallCtx(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return s.m.Client.CallTool(ctx, req)
}

// concurrently makes n calls at once and returns the failures.
func concurrently(c caller, n int, name string, args func(i int) map[string]any) []string {
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	for i := range n {
		wg.Go(func() {
			res, err := c.CallCtx(ctx, name, args(i))
			if err == nil && !res.IsError {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures = append(failures, fmt.Sprintf("call %d: %v", i, err))
			} else {
				failures = append(failures, fmt.Sprintf("call %d: %s", i, ts.Text(res)))
			}
		})
	}
	wg.Wait()
	return failures
}

// With every default, 200 concurrent calls on one session all succeed,
// over stdio and over HTTP. Each call takes 200ms, so they overlap: more
// than max_in_flight (64) reach the queue.
func TestDefaultsTake200ConcurrentCalls(t *testing.T) {
	t.Parallel()
	slow := func(i int) map[string]any { return map[string]any{"ms": 200, "tag": fmt.Sprintf("c%d", i)} }
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		m := ts.StartMux(t, lab)
		if f := concurrently(stdioCaller{m}, 200, "docs__slow", slow); len(f) > 0 {
			t.Fatalf("%d of 200 calls failed:\n%s", len(f), strings.Join(f, "\n"))
		}
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
		if f := concurrently(conn, 200, "docs__slow", slow); len(f) > 0 {
			t.Fatalf("%d of 200 calls failed:\n%s", len(f), strings.Join(f, "\n"))
		}
	})
}

// With every default, one identity calling 1,000 times a second for a few
// seconds has every call succeed: the rate limit is off unless configured.
// The rate achieved is printed, not asserted.
func TestDefaultsTakeSustained1000CallsPerSecond(t *testing.T) {
	const (
		perSecond = 1000
		seconds   = 3
		// Calls in flight at once; a call that would exceed it waits, and
		// the rate printed shows it.
		maxOpen = 256
	)
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	c := stdioCaller{m}
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()

	var (
		ok       atomic.Int64
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
	)
	open := make(chan struct{}, maxOpen)
	tick := time.NewTicker(time.Second / perSecond)
	defer tick.Stop()
	begun := time.Now()
	for i := range perSecond * seconds {
		<-tick.C
		open <- struct{}{}
		wg.Go(func() {
			defer func() { <-open }()
			msg := fmt.Sprintf("m%d", i)
			res, err := c.CallCtx(ctx, "docs__echo", map[string]any{"message": msg})
			switch {
			case err != nil:
			case res.IsError:
				err = fmt.Errorf("%s", ts.Text(res))
			case ts.Text(res) != "docs: "+msg:
				err = fmt.Errorf("answer %q to %s", ts.Text(res), msg)
			default:
				ok.Add(1)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, fmt.Sprintf("call %d: %v", i, err))
		})
	}
	wg.Wait()
	took := time.Since(begun)
	t.Logf("%d calls in %s: %.0f calls/s from one identity", ok.Load(), took.Round(time.Millisecond), float64(ok.Load())/took.Seconds())
	if len(failures) > 0 {
		t.Fatalf("%d of %d calls failed, first: %s", len(failures), perSecond*seconds, failures[0])
	}
}

// max_in_flight = 1, max_queued = 1: with one slow call in flight and one
// queued, a third is refused busy at once; a queued call its caller
// cancels leaves the queue, and the next call waits its turn and succeeds.
func TestBusyServer(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Extra: "max_in_flight = 1\nmax_queued = 1"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	c := stdioCaller{m}
	type answer struct {
		tag string
		res *mcp.CallToolResult
		err error
	}
	start := func(ctx context.Context, tag string, ms int) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := c.CallCtx(ctx, "docs__slow", map[string]any{"ms": ms, "tag": tag})
			ch <- answer{tag, res, err}
		}()
		return ch
	}
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first := start(firstCtx, "first", 60000)
	lab.WaitStarted(t, "first")

	// Two more at once: one of them queues, the other is refused.
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	ctxC, cancelC := context.WithCancel(context.Background())
	defer cancelC()
	b, cc := start(ctxB, "b", 60000), start(ctxC, "c", 60000)
	var refused answer
	cancelQueued := cancelC
	select {
	case refused = <-b:
	case refused = <-cc:
		cancelQueued = cancelB
	}
	if refused.err != nil || !refused.res.IsError {
		t.Fatalf("call %s: %v %+v", refused.tag, refused.err, refused.res)
	}
	if got, want := ts.Text(refused.res), "server docs is busy: 1 calls in flight and 1 queued; try again later"; got != want {
		t.Fatalf("refused call %s: %q, want %q", refused.tag, got, want)
	}
	m.Log.WaitLine(t, "busy audit", ts.Msg("call", "tool", "docs__slow", "outcome", "busy"))

	cancelQueued()
	m.Log.WaitLine(t, "cancelled audit", ts.Msg("call", "tool", "docs__slow", "outcome", "cancelled"))
	next := start(context.Background(), "next", 0)
	cancelFirst() // frees the slot; next takes it
	a := <-next
	if a.err != nil || a.res.IsError || ts.Text(a.res) != "slept 0 tag=next" {
		t.Fatalf("next call: %v %q", a.err, ts.Text(a.res))
	}
	<-first
}

// rate_limit per identity: the second call at once is refused, says which
// limit, and is counted in /metrics.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	// A hundred seconds per token: the second call comes before the next
	// however slow the machine.
	lab := ts.HTTPLab(t, "\n[limits]\nrate_limit = 0.01\nrate_burst = 1", "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Listeners: 2})
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
	if res := conn.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Fatalf("first call: %q", ts.Text(res))
	}
	res := conn.MustCall("docs__search", map[string]any{"query": "public"})
	want := `rate limit exceeded for identity "reader": at most 0.01 calls per second (bursts of 1); try again later`
	if !res.IsError || ts.Text(res) != want {
		t.Fatalf("second call: isError=%v %q, want %q", res.IsError, ts.Text(res), want)
	}
	fams, _ := ts.Scrape(t, h.Base(1))
	if got, _ := ts.Sample(fams, "mcpmux_rate_limited_total", map[string]string{"identity": "reader"}); got != 1 {
		t.Errorf("mcpmux_rate_limited_total{identity=reader} = %v, want 1", got)
	}
	labels := map[string]string{"identity": "reader", "tool": "docs__search", "server": "docs", "decision": "allowed"}
	for outcome, n := range map[string]float64{"ok": 1, "rate_limited": 1} {
		labels["outcome"] = outcome
		if got, _ := ts.Sample(fams, "mcpmux_calls_total", labels); got != n {
			t.Errorf("mcpmux_calls_total{outcome=%s} = %v, want %v", outcome, got, n)
		}
	}
}

// Arguments with a duplicate key, or two keys that differ only in case, at
// the top level or nested, are refused before they reach the child.
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	for _, c := range []struct{ args, want string }{
		{`{"query":"public","query":"private"}`, `docs__search: arguments: duplicate key "query" at (root)`},
		{`{"query":"public","filter":{"a":[{"k":1,"k":2}]}}`, `docs__search: arguments: duplicate key "k" at /filter/a/0`},
		{`{"query":"public","QUERY":"private"}`, `docs__search: arguments: keys "query" and "QUERY" differ only in case at (root)`},
	} {
		// The arguments go out as written: a client's encoder would drop
		// the duplicate.
		raw := m.RawRequest(ctx, "tools/call", map[string]any{"name": "docs__search", "arguments": json.RawMessage(c.args)}, false)
		var res struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		if !res.IsError || len(res.Content) != 1 || res.Content[0].Text != c.want {
			t.Errorf("%s: %s, want %s", c.args, raw, c.want)
		}
	}
	m.Log.WaitLine(t, "invalid audit", ts.Msg("call", "tool", "docs__search", "decision", "invalid"))
}

// A tool whose inputSchema is over max_schema_bytes or max_schema_depth is
// left out, and the log says why.
func TestSchemaLimitsLeaveToolsOut(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, limits, why string
	}{
		// search's schema has a property: three levels of objects.
		{"depth", "max_schema_depth = 2", "tool left out: its inputSchema is nested deeper than max_schema_depth"},
		{"bytes", "max_schema_bytes = 64", "tool left out: its inputSchema is larger than max_schema_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lab := ts.NewLab(t, "\n[limits]\n"+c.limits, ts.Server{Alias: "docs"})
			lab.WritePolicy(t, "reader", `allow = ["*"]`)
			m := ts.StartMux(t, lab)
			m.Log.WaitLine(t, "search left out", ts.Msg(c.why, "server", "docs", "child_tool", "search"))
			names := m.ToolNames()
			if ts.Contains(names, "docs__search") || !ts.Contains(names, "docs__whoami") {
				t.Fatalf("tools %v: want whoami and not search", names)
			}
		})
	}
}
