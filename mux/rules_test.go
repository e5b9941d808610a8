package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/pipeline"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// rulesPolicy is reader's policy in these tests: reads under /pub only,
// and write only for team ops.
const rulesPolicy = `allow = ["*"]

[[rule]]
tools = ["lab__read"]
allow_if = 'args.path.startsWith("/pub/")'
message = "read only under /pub"

[[rule]]
tools = ["lab__write*"]
allow_if = 'claims.team == "ops"'
`

// teamPolicy is team's policy: lab's tools for team ops only.
const teamPolicy = `allow = ["*"]

[[rule]]
tools = ["*"]
allow_if = 'server != "lab" || claims.team == "ops"'
`

// rulesLab is a Mux on two children: lab, with tools read and write, which
// counts the calls that reach it, and docs, with search. reader has
// rulesPolicy, team teamPolicy, plain every tool.
type rulesLab struct {
	m     *Mux
	log   *testsupport.SyncBuffer
	calls *atomic.Int32
	lab   *server.MCPServer
}

func startRulesLab(t *testing.T) *rulesLab {
	t.Helper()
	l := &rulesLab{log: &testsupport.SyncBuffer{}, calls: new(atomic.Int32)}
	echo := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		l.calls.Add(1)
		return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
	}
	l.lab = server.NewMCPServer("lab", "1", server.WithToolCapabilities(true))
	l.lab.AddTools(
		server.ServerTool{Tool: mcp.NewTool("read", mcp.WithString("path")), Handler: echo},
		server.ServerTool{Tool: mcp.NewTool("write", mcp.WithString("path")), Handler: echo},
	)
	docs := server.NewMCPServer("docs", "1", server.WithToolCapabilities(true))
	docs.AddTool(mcp.NewTool("search"), echo)
	labURL, docsURL := serveChild(t, l.lab).URL+"/mcp", serveChild(t, docs).URL+"/mcp"
	policies := map[string]string{"reader": rulesPolicy, "team": teamPolicy, "plain": `allow = ["*"]`}
	l.m = runMux(t, policies, l.log, func(dir string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n\n[servers.docs]\nurl = %q\n", dir, labURL, docsURL)
	})
	return l
}

func TestRuleRefusesCall(t *testing.T) {
	l := startRulesLab(t)
	m, log, calls := l.m, l.log, l.calls
	ctx := context.Background()
	r := m.CallTool(ctx, "reader", "lab__read", json.RawMessage(`{"path":"/pub/a"}`))
	if r.Decision != pipeline.DecisionAllowed || r.Outcome != pipeline.OutcomeOK {
		t.Fatalf("inside /pub: %+v %q", r, text(r))
	}
	// A key that differs from path only in case is refused before any
	// rule reads args: a child decoding into a struct would take it.
	before := calls.Load()
	r = m.CallTool(ctx, "reader", "lab__read", json.RawMessage(`{"path":"/pub/a","PATH":"/etc/passwd"}`))
	if want := `lab__read: arguments: keys "path" and "PATH" differ only in case at (root)`; r.Decision != pipeline.DecisionInvalid || r.Outcome != pipeline.OutcomeRefused || text(r) != want {
		t.Fatalf("path and PATH: %+v %q, want %q", r, text(r), want)
	}
	if calls.Load() != before {
		t.Fatal("path and PATH: the child was called")
	}
	for _, args := range []string{`{"path":"/etc/passwd"}`, `{}`} {
		before := calls.Load()
		r = m.CallTool(ctx, "reader", "lab__read", json.RawMessage(args))
		if r.Decision != pipeline.DecisionRule || r.Outcome != pipeline.OutcomeRefused || r.Rule == nil || r.Rule.Rule.Index != 1 {
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
	if r := m.CallTool(ctx, "plain", "lab__read", json.RawMessage(`{"path":"/etc"}`)); r.Decision != pipeline.DecisionAllowed {
		t.Fatalf("plain: %+v", r)
	}
}

func TestRuleHidesTool(t *testing.T) {
	l := startRulesLab(t)
	m, calls := l.m, l.calls
	ops := upstream.WithCaller(context.Background(), "reader", map[string]any{"team": "ops"})
	dev := upstream.WithCaller(context.Background(), "reader", map[string]any{"team": "dev"})
	none := upstream.WithIdentity(context.Background(), "reader")

	listed := func(ctx context.Context) string {
		b, _ := m.p.Serve(ctx, &upstream.Request{Method: string(mcp.MethodToolsList)})
		return string(b)
	}
	if l := listed(ops); !strings.Contains(l, `"lab__write"`) || !strings.Contains(l, `"lab__read"`) {
		t.Fatalf("ops sees %s", l)
	}
	for _, ctx := range []context.Context{dev, none} {
		if l := listed(ctx); strings.Contains(l, `"lab__write"`) || !strings.Contains(l, `"lab__read"`) {
			t.Fatalf("%v sees %s", upstream.ClaimsFrom(ctx), l)
		}
		if got := m.relay.FilterTools(ctx, []mcp.Tool{{Name: "lab__write"}}); len(got) != 0 {
			t.Fatalf("mcp-go's filter lets %v call lab__write", upstream.ClaimsFrom(ctx))
		}
		r := m.CallTool(ctx, "reader", "lab__write", nil)
		if r.Decision != pipeline.DecisionRule || r.Tool != nil || r.Rule == nil || r.Rule.Rule.Index != 2 {
			t.Fatalf("call by %v: %+v", upstream.ClaimsFrom(ctx), r)
		}
		call := &upstream.Request{Method: string(mcp.MethodToolsCall), Params: frame.Params{Name: "lab__write"}}
		if _, e := m.p.Serve(ctx, call); e == nil || e.Code != mcp.INVALID_PARAMS || e.Message != "tool 'lab__write' not found: tool not found" {
			t.Fatalf("a tools/call of it is answered %+v; want the unknown tool's error", e)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("%d calls reached the child", calls.Load())
	}
	if r := m.CallTool(ops, "reader", "lab__write", nil); r.Decision != pipeline.DecisionAllowed {
		t.Fatalf("ops: %+v", r)
	}

	// The list is a cache: one encoding per view, whoever asks.
	cat := m.catalog.Load()
	dev2 := catalog.Viewer{Policy: m.policies.Current().For("reader"), Claims: map[string]any{"team": "qa"}}
	a, b := cat.List(catalog.KindTool, catalog.Viewer{Policy: dev2.Policy, Claims: upstream.ClaimsFrom(dev)}), cat.List(catalog.KindTool, dev2)
	if &a[0] != &b[0] {
		t.Error("two callers with the same view got separate encodings")
	}
	if c := cat.List(catalog.KindTool, catalog.Viewer{Policy: dev2.Policy, Claims: upstream.ClaimsFrom(ops)}); &c[0] == &a[0] {
		t.Error("ops and dev share an encoding")
	}
}

// With no rules, a call allocates nothing more for them: the no-rules path
// is the one BenchmarkCall measures; here the view key is checked to be
// free.
func TestRuleViewWithoutRulesIsFree(t *testing.T) {
	m := startRulesLab(t).m
	cat, v := m.catalog.Load(), catalog.Viewer{Policy: m.policies.Current().For("plain")}
	if n := testing.AllocsPerRun(100, func() { _ = cat.List(catalog.KindTool, v) }); n != 0 {
		t.Errorf("a cached list without rules allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = v.Sees(cat.Kinds[catalog.KindTool].List[0]) }); n != 0 {
		t.Errorf("sees without rules allocates %v times", n)
	}
}

// claimsUpstream serves m's HTTP upstream, each request as the caller its
// X-Identity and X-Claims (a JSON object) headers name, as a JWT's would,
// and returns a connect function for it; each client keeps a listen stream
// open, where list_changed arrives.
func claimsUpstream(t *testing.T, m *Mux) func(identity string, claims map[string]any) *upstreamClient {
	t.Helper()
	up := m.NewHTTPUpstream(edge.HTTPOptions{Path: "/mcp"})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var claims map[string]any
		if c := r.Header.Get("X-Claims"); c != "" {
			if err := json.Unmarshal([]byte(c), &claims); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		up.ServeHTTP(w, r.WithContext(upstream.WithCaller(r.Context(), r.Header.Get("X-Identity"), claims)))
	}))
	t.Cleanup(func() {
		up.Shutdown(context.Background())
		hs.Close()
	})
	return func(identity string, claims map[string]any) *upstreamClient {
		t.Helper()
		headers := map[string]string{"X-Identity": identity}
		if claims != nil {
			c, _ := json.Marshal(claims)
			headers["X-Claims"] = string(c)
		}
		tr, err := transport.NewStreamableHTTP(hs.URL+"/mcp", transport.WithHTTPHeaders(headers), transport.WithContinuousListening())
		if err != nil {
			t.Fatal(err)
		}
		u := connect(t, tr, nil)
		t.Cleanup(func() { _ = u.Close() })
		return u
	}
}

// watchPolicies runs m's policy watcher, as mcpmux serve does, until t
// ends.
func watchPolicies(t *testing.T, m *Mux) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan error, 1)
	go func() { watched <- m.policies.Watch(ctx, m.PolicyChanged) }()
	t.Cleanup(func() {
		cancel()
		if err := <-watched; err != nil {
			t.Error(err)
		}
	})
}

// writePolicy replaces identity's policy file with body at once, so that
// no reload reads it half-written.
func writePolicy(t *testing.T, m *Mux, identity, body string) {
	t.Helper()
	path := filepath.Join(m.cfg.Mux.PolicyDir, identity+".toml")
	tmp := filepath.Join(m.cfg.Mux.PolicyDir, "."+identity+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// toolNames lists u's tools, their names joined by spaces.
func toolNames(t *testing.T, u *upstreamClient) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	res, err := u.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, " ")
}

// toolsChanged counts the tools list_changed u has received.
func toolsChanged(u *upstreamClient) int {
	return len(u.received(string(mcp.MethodNotificationToolsListChanged)))
}

// awaitToolsChanged waits until u has received n tools list_changed.
func awaitToolsChanged(t *testing.T, u *upstreamClient, who string, n int) {
	t.Helper()
	testsupport.WaitFor(t, fmt.Sprintf("%s's tools list_changed #%d", who, n), func() bool { return toolsChanged(u) >= n })
}

// Sessions of an identity whose rules read claims are told of every edit of
// its policy that changes what it grants, whatever their claims; an edit
// that only moves the rules (a comment on top) tells no one, though the
// audit line names the rule's new line; another identity's sessions hear
// nothing of it.
func TestRuleListChangedOnPolicyEdit(t *testing.T) {
	l := startRulesLab(t)
	watchPolicies(t, l.m)
	connect := claimsUpstream(t, l.m)
	ops, dev, plain := connect("reader", map[string]any{"team": "ops"}), connect("reader", map[string]any{"team": "dev"}), connect("plain", nil)
	if got := toolNames(t, dev); got != "lab__read docs__search" {
		t.Fatalf("dev lists %q", got)
	}

	// dev may write now: both reader sessions are told, and dev sees it.
	writePolicy(t, l.m, "reader", strings.Replace(rulesPolicy, `claims.team == "ops"`, `claims.team in ["ops", "dev"]`, 1))
	awaitToolsChanged(t, ops, "ops", 1)
	awaitToolsChanged(t, dev, "dev", 1)
	if got := toolNames(t, dev); got != "lab__read lab__write docs__search" {
		t.Errorf("dev lists %q after the edit", got)
	}

	// Two comment lines on top move every rule.
	moved := "# reader\n# reads under /pub\n" + strings.Replace(rulesPolicy, `claims.team == "ops"`, `claims.team in ["ops", "dev"]`, 1)
	writePolicy(t, l.m, "reader", moved)
	testsupport.WaitFor(t, "the moved rules", func() bool { return l.m.policies.Current().For("reader").Rules()[0].Line == 7 })
	r := l.m.CallTool(upstream.WithCaller(context.Background(), "reader", map[string]any{"team": "ops"}), "reader", "lab__read", json.RawMessage(`{"path":"/etc"}`))
	if r.Decision != pipeline.DecisionRule || r.Rule.Rule.Line != 7 || !strings.Contains(lastLine(l.log, `"decision":"rule"`), `"rule_line":7`) {
		t.Errorf("refused by %v; audit line %s", r.Rule, lastLine(l.log, `"decision":"rule"`))
	}

	// Only the next edit that changes something is told, once.
	writePolicy(t, l.m, "reader", rulesPolicy)
	awaitToolsChanged(t, ops, "ops", 2)
	awaitToolsChanged(t, dev, "dev", 2)
	writePolicy(t, l.m, "plain", `allow = ["docs__*"]`)
	awaitToolsChanged(t, plain, "plain", 1)
	if got := toolNames(t, plain); got != "docs__search" {
		t.Errorf("plain lists %q", got)
	}
	for who, u := range map[string]*upstreamClient{"ops": ops, "dev": dev, "plain": plain} {
		want := map[string]int{"ops": 2, "dev": 2, "plain": 1}[who]
		if n := toolsChanged(u); n != want {
			t.Errorf("%s got %d tools list_changed, want %d", who, n, want)
		}
	}
	if got := toolNames(t, dev); got != "lab__read docs__search" {
		t.Errorf("dev lists %q after the last edit", got)
	}
}

// lastLine returns the last line of log that contains want, or "".
func lastLine(log *testsupport.SyncBuffer, want string) string {
	var line string
	for l := range strings.SplitSeq(log.String(), "\n") {
		if strings.Contains(l, want) {
			line = l
		}
	}
	return line
}

// A child's new tool that only callers with some claims see changes the
// policy's widest view: every session of the identity is told (the one
// whose list did change among them), and sees what its claims let it see.
func TestRuleListChangedOnCatalogChange(t *testing.T) {
	l := startRulesLab(t)
	connect := claimsUpstream(t, l.m)
	ops, dev := connect("reader", map[string]any{"team": "ops"}), connect("reader", map[string]any{"team": "dev"})
	if got := toolNames(t, ops); got != "lab__read lab__write docs__search" {
		t.Fatalf("ops lists %q", got)
	}
	l.lab.AddTool(mcp.NewTool("write_more"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	awaitToolsChanged(t, ops, "ops", 1)
	awaitToolsChanged(t, dev, "dev", 1)
	if got := toolNames(t, ops); got != "lab__read lab__write lab__write_more docs__search" {
		t.Errorf("ops lists %q", got)
	}
	if got := toolNames(t, dev); got != "lab__read docs__search" {
		t.Errorf("dev lists %q", got)
	}
}

// Two claim sets under a rule that reads server and claims get their own
// lists, each right, each encoded once.
func TestRuleClaimSetsListedApart(t *testing.T) {
	l := startRulesLab(t)
	connect := claimsUpstream(t, l.m)
	for _, c := range []struct {
		claims map[string]any
		want   string
	}{
		{map[string]any{"team": "ops"}, "lab__read lab__write docs__search"},
		{map[string]any{"team": "dev"}, "docs__search"},
		{nil, "docs__search"},
		{map[string]any{"team": "ops", "more": 1.0}, "lab__read lab__write docs__search"},
	} {
		u := connect("team", c.claims)
		for range 2 {
			if got := toolNames(t, u); got != c.want {
				t.Errorf("team with %v lists %q, want %q", c.claims, got, c.want)
			}
		}
	}
	// Cached by what the rule decides: ops' two claim sets share one list,
	// dev and no claims another.
	if n := l.m.catalog.Load().Cached(l.m.policies.Current().For("team")); n != 2 {
		t.Errorf("%d lists kept for team, want 2", n)
	}
}

// The list cache keeps at most maxViews claims views of one policy per
// snapshot; callers beyond them get their lists, right, encoded afresh.
func TestRuleListCacheBounded(t *testing.T) {
	const tools = 7 // 2^7 = 128 views
	child := server.NewMCPServer("lab", "1", server.WithToolCapabilities(true))
	for i := range tools {
		child.AddTool(mcp.NewTool(fmt.Sprintf("t%d", i)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	}
	url := serveChild(t, child).URL + "/mcp"
	m := runMux(t, map[string]string{"many": "allow = [\"*\"]\n\n[[rule]]\ntools = [\"*\"]\ndeny_if = 'tool in claims'\n"}, nil, func(dir string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n", dir, url)
	})
	cat, p := m.catalog.Load(), m.policies.Current().For("many")
	viewOf := func(bits int) (catalog.Viewer, string) {
		claims, want := map[string]any{}, []string{}
		for i := range tools {
			name := fmt.Sprintf("lab__t%d", i)
			if bits&(1<<i) != 0 {
				claims[name] = true
			} else {
				want = append(want, `"`+name+`"`)
			}
		}
		return catalog.Viewer{Policy: p, Claims: claims}, strings.Join(want, " ")
	}
	listed := func(b []byte) string {
		var defs []struct{ Name string }
		if err := json.Unmarshal(b, &defs); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range defs {
			names = append(names, `"`+d.Name+`"`)
		}
		return strings.Join(names, " ")
	}
	for bits := range 1 << tools {
		v, want := viewOf(bits)
		if got := listed(cat.List(catalog.KindTool, v)); got != want {
			t.Fatalf("view %07b lists %s, want %s", bits, got, want)
		}
	}
	any0, _ := viewOf(0)
	if kept := cat.Cached(any0.Policy); kept != catalog.MaxViews {
		t.Errorf("%d lists kept, want %d", kept, catalog.MaxViews)
	}
	first, _ := viewOf(0)
	if a, b := cat.List(catalog.KindTool, first), cat.List(catalog.KindTool, first); &a[0] != &b[0] {
		t.Error("the first view is not kept")
	}
	last, want := viewOf(1<<tools - 1)
	if a, b := cat.List(catalog.KindTool, last), cat.List(catalog.KindTool, last); &a[0] == &b[0] || listed(a) != want {
		t.Errorf("a view beyond the bound: kept, or listed %s", listed(a))
	}
}
