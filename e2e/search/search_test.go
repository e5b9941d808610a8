package search

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

const (
	findTools = "mcpmux__find_tools"
	callTool  = "mcpmux__call_tool"
)

// found is what find_tools answered: the names of its structuredContent's
// tools, each checked to carry an input schema, and checked to be what
// its text says too.
func found(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	if res.IsError {
		t.Fatalf("find_tools: %s", ts.Text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var text any
	if err := json.Unmarshal([]byte(ts.Text(res)), &text); err != nil || !reflect.DeepEqual(text, res.StructuredContent) {
		t.Errorf("find_tools' text %s is not its structuredContent %s (%v)", ts.Text(res), b, err)
	}
	var sc struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range sc.Tools {
		if len(tool.InputSchema) == 0 {
			t.Errorf("find_tools gave %s without its input schema", tool.Name)
		}
		names = append(names, tool.Name)
	}
	return names
}

func find(t *testing.T, m *ts.Mux, query string) []string {
	t.Helper()
	return found(t, m.MustCall(findTools, map[string]any{"query": query, "limit": 20}))
}

// Search mode lists mcpmux's two tools and the always ones; find_tools
// finds what the caller may call, and call_tool calls it as a direct call
// would, audited under the tool's own name; a direct call still works.
func TestFindThenCall(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden}, ts.Server{Alias: "tickets", Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", "allow = [\"*\"]\ncatalog = \"search\"\nalways = [\"docs__echo\"]\n")
	m := ts.StartMux(t, lab)
	if names := sorted(m.ToolNames()); !slices.Equal(names, []string{"docs__echo", callTool, findTools}) {
		t.Fatalf("search mode lists %v", names)
	}
	if names := find(t, m, "search"); !slices.Contains(names, "docs__search") || !slices.Contains(names, "tickets__search") {
		t.Errorf("find_tools search found %v", names)
	}
	if names := found(t, m.MustCall(findTools, map[string]any{"query": "search", "server": "tickets"})); len(names) == 0 || hasPrefix(names, "docs__") {
		t.Errorf("find_tools search in tickets found %v", names)
	}

	direct := m.MustCall("docs__search", map[string]any{"query": "public"})
	through := m.MustCall(callTool, map[string]any{"name": "docs__search", "arguments": map[string]any{"query": "public"}})
	if through.IsError || ts.Text(through) != ts.Text(direct) {
		t.Errorf("call_tool answered %q (isError %v), a direct call %q", ts.Text(through), through.IsError, ts.Text(direct))
	}
	m.Log.WaitLines(t, "two audit lines of docs__search", 2, ts.Msg("call", "tool", "docs__search"))
	if got := m.Log.Lines(ts.Msg("call", "tool", callTool)); len(got) != 0 {
		t.Errorf("call_tool wrote audit lines of its own: %v", got)
	}

	// Refusals are a direct call's.
	_, errDirect := m.Call("docs__nope", nil)
	_, errThrough := m.Call(callTool, map[string]any{"name": "docs__nope"})
	if errDirect == nil || errThrough == nil || errDirect.Error() != errThrough.Error() {
		t.Errorf("an unknown tool: directly %v, through call_tool %v", errDirect, errThrough)
	}
	bad := map[string]any{"query": 7}
	resDirect := m.MustCall("docs__search", bad)
	resThrough := m.MustCall(callTool, map[string]any{"name": "docs__search", "arguments": bad})
	if !resDirect.IsError || ts.Text(resDirect) != ts.Text(resThrough) {
		t.Errorf("bad arguments: directly %q, through call_tool %q", ts.Text(resDirect), ts.Text(resThrough))
	}
	for _, c := range []struct {
		tool string
		args map[string]any
		says string
	}{
		{findTools, map[string]any{}, "query is required"},
		{findTools, map[string]any{"query": "x", "limit": 21}, "limit must be between 1 and 20"},
		{callTool, map[string]any{}, "name is required"},
		{callTool, map[string]any{"name": findTools}, "calls a tool of a server"},
	} {
		if res := m.MustCall(c.tool, c.args); !res.IsError || !strings.Contains(ts.Text(res), c.says) {
			t.Errorf("%s %v: %q, want an error saying %q", c.tool, c.args, ts.Text(res), c.says)
		}
	}
}

// A restricted identity never finds what it cannot call, and an edit of
// its policy changes what it finds at once; a change of what it may call
// that leaves its list as it is sends no list_changed.
func TestFindOnlyWhatThePolicyAllows(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "catalog = \"search\"", ts.Server{Alias: "docs", Hide: ts.LabHidden}, ts.Server{Alias: "tickets", Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	m := ts.StartMux(t, lab)
	if names := find(t, m, "search"); !slices.Contains(names, "docs__search") || hasPrefix(names, "tickets__") {
		t.Fatalf("find_tools under allow docs__* found %v", names)
	}
	m.DrainNotifications()
	lab.WritePolicy(t, "reader", `allow = ["tickets__*"]`)
	m.Log.WaitLine(t, "the policy reload", ts.Msg("policies reloaded"))
	ts.WaitFor(t, "tickets' tools found", func() bool {
		names := find(t, m, "search")
		return slices.Contains(names, "tickets__search") && !hasPrefix(names, "docs__")
	})
	// Now a change that does show: one always tool.
	lab.WritePolicy(t, "reader", "allow = [\"tickets__*\"]\nalways = [\"tickets__search\"]\n")
	m.Notification(string(mcp.MethodNotificationToolsListChanged))
	if names := sorted(m.ToolNames()); !slices.Equal(names, []string{callTool, findTools, "tickets__search"}) {
		t.Errorf("with always tickets__search the list is %v", names)
	}
	if n := len(m.Pending(string(mcp.MethodNotificationToolsListChanged))); n != 0 {
		t.Errorf("%d more tools list_changed: the edit before, which left the list as it was, sent one", n)
	}
	if _, err := m.Call(callTool, map[string]any{"name": "docs__search", "arguments": map[string]any{"query": "x"}}); err == nil {
		t.Error("call_tool reached docs__search, which the policy no longer allows")
	}
}

func sorted(names []string) []string { return slices.Sorted(slices.Values(names)) }

func hasPrefix(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// mcpmux tools --as prints, below the table, how large what the
// identity's client is sent is in either mode, and which is in force.
func TestToolsCommandSizes(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "catalog = \"auto\"\nsearch_above = 3", ts.Server{Alias: "docs", Hide: ts.LabHidden}, ts.Server{Alias: "tickets", Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	lab.WritePolicy(t, "narrow", `allow = ["docs__echo"]`)
	for _, c := range []struct{ as, mode string }{{"reader", "search"}, {"narrow", "full"}} {
		r := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", c.as)
		var full, fullB, search, searchB int
		var mode string
		i := strings.Index(r.Stdout, "tools/list of ")
		if r.Code != 0 || i < 0 {
			t.Fatalf("tools --as %s exited %d:\n%s\n%s", c.as, r.Code, r.Stdout, r.Stderr)
		}
		if _, err := fmt.Sscanf(r.Stdout[i:], "tools/list of "+c.as+"'s client, about: full %d tokens (%d bytes), search %d tokens (%d bytes); in force: %s",
			&full, &fullB, &search, &searchB, &mode); err != nil {
			t.Fatalf("tools --as %s: %v in %q", c.as, err, r.Stdout[i:])
		}
		if mode != c.mode || full != fullB/4 || search != searchB/4 || fullB == 0 || searchB == 0 {
			t.Errorf("tools --as %s: full %d (%d B), search %d (%d B), in force %s; want %s", c.as, full, fullB, search, searchB, mode, c.mode)
		}
		if c.as == "reader" && searchB >= fullB {
			t.Errorf("search mode's list (%d B) is not smaller than the full one (%d B)", searchB, fullB)
		}
	}
}

// A call through call_tool that the client cancels has the cancellation
// passed on to the child, and one past call_timeout is answered as a
// direct call is and cancelled at the child, each audited under the
// tool's own name; at either protocol.
func TestCallToolCancellationAndTimeout(t *testing.T) {
	t.Parallel()
	for _, version := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, mcp.ProtocolVersion20260728} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			lab := ts.NewLab(t, "catalog = \"search\"\ncall_timeout = \"2s\"", ts.Server{Alias: "docs", Hide: ts.LabHidden})
			lab.WritePolicy(t, "reader", `allow = ["*"]`)
			m := ts.StartMuxClient(t, lab, version)
			slow := func(ms int, tag string) map[string]any {
				return map[string]any{"name": "docs__slow", "arguments": map[string]any{"ms": ms, "tag": tag}}
			}

			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				req := mcp.CallToolRequest{}
				req.Params.Name = callTool
				req.Params.Arguments = slow(60000, "gaveup")
				_, err := m.Client.CallTool(ctx, req)
				errc <- err
			}()
			lab.WaitStarted(t, "gaveup")
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("a cancelled call_tool returned a result")
			}
			m.Log.WaitLine(t, "child cancelled", ts.Msg("server stderr", "server", "docs", "stderr", "labserver docs slow gaveup cancelled"))
			m.Log.WaitLine(t, "cancelled audit", ts.Msg("call", "tool", "docs__slow", "outcome", "cancelled"))

			res := m.MustCall(callTool, slow(60000, "late"))
			if !res.IsError || !strings.Contains(ts.Text(res), "timed out after 2s") {
				t.Errorf("call_tool past call_timeout: %v %q", res.IsError, ts.Text(res))
			}
			m.Log.WaitLine(t, "timeout audit", ts.Msg("call", "tool", "docs__slow", "outcome", "timeout"))
			m.Log.WaitLine(t, "child cancelled at the timeout", ts.Msg("server stderr", "server", "docs", "stderr", "labserver docs slow late cancelled"))
		})
	}
}

// At 2026-07-28 a round begun through call_tool is resumed by the client's
// retry of the same call_tool request with the requestState and its
// answers, as a direct call's round is by the direct retry: a retry naming
// another tool is refused without using the state, the right one gets the
// child's answer, and the used state is refused after.
func TestCallToolRoundRetry(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "catalog = \"search\"", ts.Server{Alias: "traffic", Command: ts.TrafficBinary(t)})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMuxModern(t, lab)
	meta := ts.ModernMeta(map[string]any{"sampling": map[string]any{}})
	answer := json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"sampled for the round"},"model":"m"}`)
	outcomes := map[string][]ts.InputRequired{}
	for _, via := range []string{"direct", "call_tool"} {
		params := func(tool string, retry map[string]any) map[string]any {
			args := map[string]any{"what": "sampling"}
			p := map[string]any{"name": tool, "arguments": args, "_meta": meta}
			if via == "call_tool" {
				p["name"], p["arguments"] = callTool, map[string]any{"name": tool, "arguments": args}
			}
			for k, v := range retry {
				p[k] = v
			}
			return p
		}
		first := ts.ReadInputRequired(t, ts.ModernRPC(t, m.Client, "tools/call", params("traffic__ask", nil)))
		if first.ResultType != "input_required" || len(first.InputRequests) != 1 || first.RequestState == "" {
			t.Fatalf("%s: the first answer is %+v, not one input request", via, first)
		}
		responses := map[string]any{}
		for k := range first.InputRequests {
			responses[k] = answer
		}
		retry := map[string]any{"requestState": first.RequestState, "inputResponses": responses}
		for _, tool := range []string{"traffic__asks", "traffic__ask", "traffic__ask"} {
			outcomes[via] = append(outcomes[via], ts.ReadInputRequired(t, ts.ModernRPC(t, m.Client, "tools/call", params(tool, retry))))
		}
	}
	unknown := "requestState is unknown or expired; call the tool again without it"
	for i, want := range []string{unknown, "sampled for the round", unknown} {
		for via, got := range outcomes {
			if r := got[i]; r.ResultType != "complete" || !strings.Contains(r.Text(), want) || r.IsError != (want == unknown) {
				t.Errorf("%s retry %d: %+v, want %q", via, i+1, r, want)
			}
		}
		if !reflect.DeepEqual(outcomes["direct"][i], outcomes["call_tool"][i]) {
			t.Errorf("retry %d: directly %+v, through call_tool %+v", i+1, outcomes["direct"][i], outcomes["call_tool"][i])
		}
	}
}
