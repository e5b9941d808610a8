package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// rulesPolicy is reader's policy in these tests: reads under /pub only,
// and write only for team ops.
const rulesPolicy = `allow = ["*"]

[[rule]]
tools = ["lab__read"]
allow_if = 'args.path.startsWith("/pub/")'
message = "read only under /pub"

[[rule]]
tools = ["lab__write"]
allow_if = 'claims.team == "ops"'
`

// startRulesLab starts a child with tools read and write, counting the
// calls that reach it, and a Mux whose reader has rulesPolicy.
func startRulesLab(t *testing.T) (*Mux, *testsupport.SyncBuffer, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	echo := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
	}
	child := server.NewMCPServer("lab", "1", server.WithToolCapabilities(true))
	child.AddTools(
		server.ServerTool{Tool: mcp.NewTool("read", mcp.WithString("path")), Handler: echo},
		server.ServerTool{Tool: mcp.NewTool("write", mcp.WithString("path")), Handler: echo},
	)
	childHTTP := server.NewStreamableHTTPServer(child, server.WithStateful(true))
	hs := httptest.NewServer(childHTTP)
	t.Cleanup(func() {
		_ = childHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	log := &testsupport.SyncBuffer{}
	m := runMux(t, map[string]string{"reader": rulesPolicy, "plain": `allow = ["*"]`}, log, func(dir string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n", dir, hs.URL+"/mcp")
	})
	return m, log, &calls
}

func TestRuleRefusesCall(t *testing.T) {
	m, log, calls := startRulesLab(t)
	ctx := context.Background()
	r := m.CallTool(ctx, "reader", "lab__read", json.RawMessage(`{"path":"/pub/a"}`))
	if r.Decision != DecisionAllowed || r.Outcome != OutcomeOK {
		t.Fatalf("inside /pub: %+v %q", r, text(r))
	}
	for _, args := range []string{`{"path":"/etc/passwd"}`, `{}`} {
		before := calls.Load()
		r = m.CallTool(ctx, "reader", "lab__read", json.RawMessage(args))
		if r.Decision != DecisionRule || r.Outcome != OutcomeRefused || r.Rule == nil || r.Rule.Rule.Index != 1 {
			t.Fatalf("%s: %+v", args, r)
		}
		if res := r.ToolResult(); res == nil || !res.IsError || !strings.HasPrefix(text(r), "lab__read: read only under /pub") {
			t.Fatalf("%s: told %q; want an isError with the rule's message", args, text(r))
		}
		if calls.Load() != before {
			t.Fatalf("%s: the child was called", args)
		}
	}
	var line string
	for l := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(l, `"decision":"rule"`) {
			line = l
		}
	}
	for _, want := range []string{`"identity":"reader"`, `"tool":"lab__read"`, `"outcome":"refused"`, `"rule":1`, `"rule_line":5`} {
		if !strings.Contains(line, want) {
			t.Errorf("audit line %s lacks %s", line, want)
		}
	}
	// Another identity's policy has no rules.
	if r := m.CallTool(ctx, "plain", "lab__read", json.RawMessage(`{"path":"/etc"}`)); r.Decision != DecisionAllowed {
		t.Fatalf("plain: %+v", r)
	}
}

func TestRuleHidesTool(t *testing.T) {
	m, _, calls := startRulesLab(t)
	ops := WithCaller(context.Background(), "reader", map[string]any{"team": "ops"})
	dev := WithCaller(context.Background(), "reader", map[string]any{"team": "dev"})
	none := WithIdentity(context.Background(), "reader")

	listed := func(ctx context.Context) string { return string(m.listPayload(ctx, kindTool, "")) }
	if l := listed(ops); !strings.Contains(l, `"lab__write"`) || !strings.Contains(l, `"lab__read"`) {
		t.Fatalf("ops sees %s", l)
	}
	for _, ctx := range []context.Context{dev, none} {
		if l := listed(ctx); strings.Contains(l, `"lab__write"`) || !strings.Contains(l, `"lab__read"`) {
			t.Fatalf("%v sees %s", ClaimsFrom(ctx), l)
		}
		if got := m.filterTools(ctx, []mcp.Tool{{Name: "lab__write"}}); len(got) != 0 {
			t.Fatalf("mcp-go's filter lets %v call lab__write", ClaimsFrom(ctx))
		}
		r := m.CallTool(ctx, "reader", "lab__write", nil)
		if r.Decision != DecisionRule || r.Tool != nil || r.Rule == nil || r.Rule.Rule.Index != 2 {
			t.Fatalf("call by %v: %+v", ClaimsFrom(ctx), r)
		}
		if a := toolAnswer(r, "lab__write"); !a.IsError || a.Content[0].(mcp.TextContent).Text != "unknown tool: lab__write" {
			t.Fatalf("told %+v; want unknown tool", a)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("%d calls reached the child", calls.Load())
	}
	if r := m.CallTool(ops, "reader", "lab__write", nil); r.Decision != DecisionAllowed {
		t.Fatalf("ops: %+v", r)
	}

	// The list is a cache: one encoding per view, whoever asks.
	cat := m.catalog.Load()
	dev2 := viewer{p: m.policies.Current().For("reader"), claims: map[string]any{"team": "qa"}}
	a, b := cat.list(kindTool, viewer{p: dev2.p, claims: ClaimsFrom(dev)}), cat.list(kindTool, dev2)
	if &a[0] != &b[0] {
		t.Error("two callers with the same view got separate encodings")
	}
	if c := cat.list(kindTool, viewer{p: dev2.p, claims: ClaimsFrom(ops)}); &c[0] == &a[0] {
		t.Error("ops and dev share an encoding")
	}
}

// With no rules, a call allocates nothing more for them: the no-rules path
// is the one BenchmarkCall measures; here the view key is checked to be
// free.
func TestRuleViewWithoutRulesIsFree(t *testing.T) {
	m, _, _ := startRulesLab(t)
	cat, v := m.catalog.Load(), viewer{p: m.policies.Current().For("plain")}
	if n := testing.AllocsPerRun(100, func() { _ = cat.list(kindTool, v) }); n != 0 {
		t.Errorf("a cached list without rules allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = v.sees(cat.kinds[kindTool].list[0]) }); n != 0 {
		t.Errorf("sees without rules allocates %v times", n)
	}
}
