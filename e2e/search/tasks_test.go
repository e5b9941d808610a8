package search

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Task-augmented calls through call_tool, driven through the real binary
// with a labserver whose task_wait runs only as a task (LAB_TASKS) as its
// child "jobs": over either edge, a task through call_tool is the task a
// direct task-augmented call of the tool makes, in every step.

// taskPolicy is reader's policy in the task tests: search mode, with a
// rule that refuses task_wait for one tag.
const taskPolicy = `allow = ["*"]
catalog = "search"

[[rule]]
tools = ["jobs__task_wait"]
deny_if = 'args.tag == "forbidden"'
message = "no forbidden tags"
`

// taskConn is a client of an mcpmux of its own, and that mcpmux's log;
// url is the mcpmux's MCP endpoint when it is served over HTTP.
type taskConn struct {
	c   *client.Client
	log *ts.LogTap
	url string
	lab *ts.Lab
}

// connectTasks starts an mcpmux whose reader has policy, with the jobs
// child, and connects a client of version to it over stdio or HTTP.
func connectTasks(t *testing.T, overHTTP bool, version, policy string) taskConn {
	t.Helper()
	lab := ts.NewLab(t, "", ts.Server{Alias: "jobs", Env: map[string]string{"LAB_TASKS": "1"}, Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", policy)
	if !overHTTP {
		m := ts.StartMuxClient(t, lab, version)
		return taskConn{c: m.Client, log: m.Log, lab: lab}
	}
	lab.AddUpstream(t, `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(token)))
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	pinned := version
	if mcp.IsModernProtocol(version) {
		pinned = "" // the client's own choice: pinned, it keeps a session's id
	}
	c := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: token, Version: pinned, Log: h.Log})
	if v := c.ProtocolVersion(); v != version {
		t.Fatalf("the client speaks %s, not %s", v, version)
	}
	return taskConn{c: c.Client, log: h.Log, url: h.URL(), lab: lab}
}

// callParams are the params of a tools/call of tool with args: directly
// (via "direct") or through call_tool; as a task when task is set. modern
// adds the _meta of a hand-made 2026-07-28 request.
func callParams(via, tool string, args map[string]any, task, modern bool) map[string]any {
	p := map[string]any{"name": tool, "arguments": args}
	if via != "direct" {
		p = map[string]any{"name": callTool, "arguments": map[string]any{"name": tool, "arguments": args}}
	}
	if task {
		p["task"] = map[string]any{"ttl": 60000}
	}
	if modern {
		p["_meta"] = ts.ModernMeta(map[string]any{})
	}
	return p
}

// rpc sends method with params.
func (tc taskConn) rpc(t *testing.T, method string, params any) (json.RawMessage, *ts.RPCError) {
	t.Helper()
	return ts.RPC(t, tc.c, method, params)
}

// modern is the answer to a hand-made 2026-07-28 tools/call with params:
// over HTTP the response's status and body (an error of that era has its
// own status, a 404 that mcp-go's client takes for the end of a session),
// its result or error otherwise.
func (tc taskConn) modern(t *testing.T, params map[string]any) string {
	t.Helper()
	if tc.url == "" {
		return answerText(ts.ModernTry(t, tc.c, "tools/call", params))
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Authorization": {"Bearer " + token}, mcp.HeaderProtocolVersion: {mcp.ProtocolVersion20260728}}
	encoded, _ := json.Marshal(params)
	for k, v := range mcp.StandardHeaders(mcp.ProtocolVersion20260728, mcp.MethodToolsCall, encoded) {
		h.Set(k, v)
	}
	a := ts.Do(t, http.MethodPost, tc.url, "", h, string(body))
	return fmt.Sprintf("%d %s", a.Status, a.Body)
}

func (tc taskConn) must(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	return ts.MustRPC(t, tc.c, method, params)
}

// start makes a task of task_wait with tag, via directly or through
// call_tool, and returns it as created.
func (tc taskConn) start(t *testing.T, via, tag string) mcp.Task {
	t.Helper()
	raw := tc.must(t, "tools/call", callParams(via, "jobs__task_wait", map[string]any{"tag": tag}, true, false))
	var ct struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(raw, &ct); err != nil || ct.Task.TaskId == "" {
		t.Fatalf("%s: task-augmented task_wait answered %s (%v), not a task", via, raw, err)
	}
	return ct.Task
}

func (tc taskConn) task(t *testing.T, id string) mcp.Task {
	t.Helper()
	var task mcp.Task
	if err := json.Unmarshal(tc.must(t, "tasks/get", map[string]any{"taskId": id}), &task); err != nil {
		t.Fatal(err)
	}
	return task
}

// tasks is how many tasks tasks/list lists.
func (tc taskConn) tasks(t *testing.T) int {
	t.Helper()
	var l mcp.ListTasksResult
	if err := json.Unmarshal(tc.must(t, "tasks/list", map[string]any{}), &l); err != nil {
		t.Fatal(err)
	}
	return len(l.Tasks)
}

func (tc taskConn) listed(t *testing.T, id string) bool {
	t.Helper()
	var l mcp.ListTasksResult
	if err := json.Unmarshal(tc.must(t, "tasks/list", map[string]any{}), &l); err != nil {
		t.Fatal(err)
	}
	for _, task := range l.Tasks {
		if task.TaskId == id {
			return true
		}
	}
	return false
}

// ended waits for task id to end and returns it.
func (tc taskConn) ended(t *testing.T, id string) mcp.Task {
	t.Helper()
	var task mcp.Task
	ts.WaitFor(t, "task "+id+" to end", func() bool {
		task = tc.task(t, id)
		return task.Status.IsTerminal()
	})
	return task
}

// taskResult is what tasks/result answered of a task, its id taken out of
// its _meta (where it names the task), to compare two tasks'.
func (tc taskConn) taskResult(t *testing.T, id string) string {
	t.Helper()
	raw, rerr := ts.RPC(t, tc.c, "tasks/result", map[string]any{"taskId": id})
	if rerr != nil {
		return answerText(raw, rerr)
	}
	var res struct {
		Meta map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if related, _ := res.Meta[mcp.RelatedTaskMetaKey].(map[string]any); related["taskId"] != id {
		t.Errorf("tasks/result of %s is tied to %v: %s", id, related, raw)
	}
	return strings.ReplaceAll(string(raw), id, "TASK")
}

// callToolExecution is call_tool's execution as tools/list shows it.
func (tc taskConn) callToolExecution(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	res, err := tc.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == callTool {
			b, _ := json.Marshal(tool.Execution)
			return string(b)
		}
	}
	t.Fatalf("tools/list has no %s", callTool)
	return ""
}

// answerText is a request's answer as text: its result or its error.
func answerText(raw json.RawMessage, rerr *ts.RPCError) string {
	if rerr != nil {
		return "error " + rerr.Error()
	}
	return string(raw)
}

// Over stdio and HTTP at 2025-11-25, a task-augmented call_tool of a tool
// that runs as a task makes the task a direct task-augmented call makes:
// created working, seen by tasks/get and tasks/list, its result the
// child's, tied to the task, once the child's task ends; cancelled by
// tasks/cancel; a rule's refusal its result. Each is audited under the
// tool's own name, never call_tool's. A tool that does not run as a task
// answers a task-augmented call_tool as a direct task-augmented call of
// it (a plain call), and a tool that runs only as a task answers
// call_tool without a task with a direct call's refusal. tools/list says
// call_tool may run as a task while the caller may call a tool that does.
func TestCallToolTask(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		overHTTP bool
	}{{"stdio", false}, {"http", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tc := connectTasks(t, c.overHTTP, mcp.LATEST_LEGACY_PROTOCOL_VERSION, taskPolicy)
			if got := tc.callToolExecution(t); got != `{"taskSupport":"optional"}` {
				t.Errorf("call_tool's execution is %s; want taskSupport optional", got)
			}
			results := map[string][]string{}
			for _, via := range []string{"direct", "call_tool"} {
				task := tc.start(t, via, via+"-done")
				if task.Status != mcp.TaskStatusWorking {
					t.Errorf("%s: created %+v, want working", via, task)
				}
				if got := tc.task(t, task.TaskId); got.Status != mcp.TaskStatusWorking {
					t.Errorf("%s: tasks/get while the child's task waits: %+v", via, got)
				}
				if !tc.listed(t, task.TaskId) {
					t.Errorf("%s: tasks/list does not list task %s", via, task.TaskId)
				}
				tc.must(t, "tools/call", callParams("call_tool", "jobs__release", map[string]any{"tag": via + "-done"}, false, false))
				if got := tc.ended(t, task.TaskId); got.Status != mcp.TaskStatusCompleted {
					t.Errorf("%s: the released task ended %+v", via, got)
				}
				res := tc.taskResult(t, task.TaskId)
				if !strings.Contains(res, `"released `+via+`-done"`) || !strings.Contains(res, `"structuredContent":{"tag":"`+via+`-done"}`) {
					t.Errorf("%s: tasks/result %s, want the child's result", via, res)
				}
				results[via] = append(results[via], strings.ReplaceAll(res, via, "VIA"))

				cancelled := tc.start(t, via, via+"-cancel")
				var cr mcp.CancelTaskResult
				if err := json.Unmarshal(tc.must(t, "tasks/cancel", map[string]any{"taskId": cancelled.TaskId}), &cr); err != nil || cr.Status != mcp.TaskStatusCancelled {
					t.Errorf("%s: tasks/cancel answered %+v (%v)", via, cr, err)
				}
				if got := tc.task(t, cancelled.TaskId); got.Status != mcp.TaskStatusCancelled {
					t.Errorf("%s: tasks/get of the cancelled task: %+v", via, got)
				}

				refused := tc.start(t, via, "forbidden")
				got := tc.ended(t, refused.TaskId)
				res = tc.taskResult(t, refused.TaskId)
				if !strings.Contains(res, "jobs__task_wait: no forbidden tags") {
					t.Errorf("%s: the rule-refused task ended %+v with %s, not the rule's message", via, got, res)
				}
				results[via] = append(results[via], string(got.Status)+" "+res)

				for _, p := range []map[string]any{
					callParams(via, "jobs__echo", map[string]any{"message": "hi"}, true, false),
					callParams(via, "jobs__task_wait", map[string]any{"tag": "plain"}, false, false),
					callParams(via, "jobs__nope", map[string]any{}, true, false),
				} {
					raw, rerr := tc.rpc(t, "tools/call", p)
					results[via] = append(results[via], answerText(raw, rerr))
				}
			}
			for i := range results["direct"] {
				if d, th := results["direct"][i], results["call_tool"][i]; d != th {
					t.Errorf("answer %d: directly %s, through call_tool %s", i+1, d, th)
				}
			}
			if r := results["call_tool"]; !strings.Contains(r[2], `"text":"jobs: hi"`) || !strings.Contains(r[3], "requires task augmentation") ||
				!strings.Contains(r[4], "'jobs__nope' not found") {
				t.Errorf("through call_tool: %q", r[2:])
			}
			for _, outcome := range []string{"ok", "cancelled"} {
				tc.log.WaitLines(t, "two "+outcome+" task_wait audit lines", 2, ts.Msg("call", "tool", "jobs__task_wait", "outcome", outcome))
			}
			tc.log.WaitLines(t, "two rule refusals of task_wait", 2, ts.Msg("call", "tool", "jobs__task_wait", "decision", "rule"))
			if lines := tc.log.Lines(ts.Msg("call", "tool", callTool)); len(lines) != 0 {
				t.Errorf("call_tool wrote audit lines of its own: %v", lines)
			}

			// Once reader may not call task_wait, a task-augmented call of
			// it, directly or through call_tool, is refused as one of a name
			// no server has, with no task made; and call_tool, with no tool
			// left that runs as a task, no longer says it may run as one.
			tc.lab.WritePolicy(t, "reader", "allow = [\"*\"]\ndeny = [\"jobs__task_wait\"]\ncatalog = \"search\"\n")
			ts.WaitFor(t, "call_tool listed without tasks", func() bool { return tc.callToolExecution(t) == "null" })
			before := tc.tasks(t)
			answer := func(via, tool string) string {
				raw, rerr := tc.rpc(t, "tools/call", callParams(via, tool, map[string]any{"tag": "denied"}, true, false))
				return strings.ReplaceAll(answerText(raw, rerr), tool, "TOOL")
			}
			unknown := answer("direct", "jobs__nope")
			for _, via := range []string{"direct", "call_tool"} {
				if got := answer(via, "jobs__task_wait"); got != unknown || !strings.Contains(got, "'TOOL' not found") {
					t.Errorf("%s: a denied task tool answered %s; an unknown one %s", via, got, unknown)
				}
			}
			if after := tc.tasks(t); after != before {
				t.Errorf("the refusals made tasks: %d before, %d after", before, after)
			}
			tc.log.WaitLines(t, "two denials of task_wait", 2, ts.Msg("call", "tool", "jobs__task_wait", "decision", "denied"))
		})
	}
}

// At 2026-07-28, which has no tasks in mcpmux, a task-augmented call_tool
// is answered as a direct task-augmented call is: a tool that runs only
// as a task refused, one that does not run plainly; over either edge.
// tools/list shows call_tool as it does at 2025-11-25.
func TestCallToolTaskModern(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		overHTTP bool
	}{{"stdio", false}, {"http", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tc := connectTasks(t, c.overHTTP, mcp.ProtocolVersion20260728, taskPolicy)
			if got := tc.callToolExecution(t); got != `{"taskSupport":"optional"}` {
				t.Errorf("call_tool's execution is %s; want taskSupport optional", got)
			}
			answers := map[string][]string{}
			for _, via := range []string{"direct", "call_tool"} {
				for _, p := range []map[string]any{
					callParams(via, "jobs__task_wait", map[string]any{"tag": "a"}, true, true),
					callParams(via, "jobs__echo", map[string]any{"message": "hi"}, true, true),
				} {
					answers[via] = append(answers[via], tc.modern(t, p))
				}
			}
			for i := range answers["direct"] {
				if d, th := answers["direct"][i], answers["call_tool"][i]; d != th {
					t.Errorf("answer %d: directly %s, through call_tool %s", i+1, d, th)
				}
			}
			if a := answers["call_tool"]; !strings.Contains(a[0], "requires task augmentation") || !strings.Contains(a[1], `"text":"jobs: hi"`) {
				t.Errorf("through call_tool: %q", a)
			}
		})
	}
}
