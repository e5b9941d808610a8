package mux

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// taskChild is a real mcp-go child whose tools run as tasks, and what it
// saw of them.
type taskChild struct {
	release chan struct{} // closed: slow's runs finish
	mu      sync.Mutex
	created []string // the child's own task ids
	plain   int      // calls of quick that did not run as a task
	// cancelled gets the id of each task a tasks/cancel reached.
	cancelled chan string
	hs        *httptest.Server
}

func newTaskChild() *taskChild {
	return &taskChild{release: make(chan struct{}), cancelled: make(chan string, 8)}
}

// spec is the lab of the child: slow (task required, runs until released
// or cancelled; mcp-go ends a task handler's context at once, so it waits
// on its own channels), quick (task optional), fail (task required, fails),
// none (no task support).
func (tc *taskChild) spec() labSpec {
	hooks := &server.TaskHooks{}
	hooks.AddOnTaskCreated(func(_ context.Context, m server.TaskMetrics) {
		tc.mu.Lock()
		tc.created = append(tc.created, m.TaskID)
		tc.mu.Unlock()
	})
	stopped := make(chan struct{})
	var once sync.Once
	hooks.AddOnTaskCancelled(func(_ context.Context, m server.TaskMetrics) {
		tc.cancelled <- m.TaskID
		once.Do(func() { close(stopped) })
	})
	slow := func(_ context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		select {
		case <-tc.release:
		case <-stopped:
			return nil, errors.New("stopped")
		}
		res := mcp.NewToolResultStructured(map[string]any{"answer": 42}, "done")
		res.Meta = &mcp.Meta{AdditionalFields: map[string]any{"x-child": "kept"}}
		return res, nil
	}
	return labSpec{
		allow:     []string{"reader"},
		childOpts: []server.ServerOption{server.WithTaskCapabilities(true, true, true), server.WithTaskHooks(hooks)},
		onChild:   func(hs *httptest.Server) { tc.hs = hs },
		tools: []server.ServerTool{
			{Tool: mcp.NewTool("slow", mcp.WithTaskSupport(mcp.TaskSupportRequired)), Handler: slow},
			{Tool: mcp.NewTool("quick", mcp.WithTaskSupport(mcp.TaskSupportOptional)),
				Handler: func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					tc.mu.Lock()
					tc.plain++
					tc.mu.Unlock()
					return mcp.NewToolResultText("quick"), nil
				}},
			{Tool: mcp.NewTool("fail", mcp.WithTaskSupport(mcp.TaskSupportRequired)),
				Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return nil, errors.New("the child's own failure")
				}},
			{Tool: mcp.NewTool("none"), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("none"), nil
			}},
		},
	}
}

func (tc *taskChild) childTasks() []string {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]string(nil), tc.created...)
}

// startTaskLab starts the child and a Mux on it, served over HTTP.
func startTaskLab(t *testing.T) (*taskChild, string) {
	tc, url, _ := startTaskLabMux(t)
	return tc, url
}

// startTaskLabMux is startTaskLab that also returns the Mux.
func startTaskLabMux(t *testing.T) (*taskChild, string, *Mux) {
	tc := newTaskChild()
	m := startLab(t, tc.spec())
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })
	return tc, url, m
}

// connectTasks connects a 2025-11-25 client with its GET stream open.
func connectTasks(t *testing.T, url string) *testsupport.Conn {
	return testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Version: mcp.ProtocolVersion20251125, Listen: true})
}

// startTask calls tool as a task and returns the task mcpmux created.
func startTask(t *testing.T, c *testsupport.Conn, tool string) mcp.Task {
	t.Helper()
	raw := testsupport.MustRPC(t, c.Client, "tools/call", map[string]any{
		"name": tool, "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
	var ct struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(raw, &ct); err != nil || ct.Task.TaskId == "" {
		t.Fatalf("tools/call as a task: %s (%v)", raw, err)
	}
	return ct.Task
}

func taskRef(id string) map[string]any { return map[string]any{"taskId": id} }

func getTask(t *testing.T, c *testsupport.Conn, id string) mcp.Task {
	t.Helper()
	var task mcp.Task
	if err := json.Unmarshal(testsupport.MustRPC(t, c.Client, "tasks/get", taskRef(id)), &task); err != nil {
		t.Fatal(err)
	}
	return task
}

func waitStatus(t *testing.T, c *testsupport.Conn, id string, want mcp.TaskStatus) {
	t.Helper()
	testsupport.WaitFor(t, "task "+id+" "+string(want), func() bool { return getTask(t, c, id).Status == want })
}

func TestTaskRequiredToolListedAndDeclared(t *testing.T) {
	_, url := startTaskLab(t)
	c := connectTasks(t, url)
	tools := map[string]json.RawMessage{}
	for _, raw := range testsupport.ListAll(t, c.Client, "tools/list", "tools") {
		var w struct{ Name string }
		_ = json.Unmarshal(raw, &w)
		tools[w.Name] = raw
	}
	for name, want := range map[string]string{"lab__slow": `"required"`, "lab__quick": `"optional"`, "lab__fail": `"required"`} {
		if !strings.Contains(string(tools[name]), `"taskSupport":`+want) {
			t.Errorf("%s listed as %s; want taskSupport %s", name, tools[name], want)
		}
	}
	caps := c.Client.GetServerCapabilities()
	if caps.Tasks == nil || caps.Tasks.Requests == nil || caps.Tasks.Requests.Tools == nil || caps.Tasks.Requests.Tools.Call == nil ||
		caps.Tasks.List == nil || caps.Tasks.Cancel == nil {
		t.Fatalf("initialize declares tasks %+v; want list, cancel and requests.tools.call", caps.Tasks)
	}
}

// A task-augmented call runs at the child as a task; the client sees
// mcpmux's task id, never the child's, polls it, and gets the child's
// result as the child sent it, tied to its own task; the status
// notification reaches only the session that owns the task, down its GET
// stream, although the client polls the task with POSTs as it ends.
func TestTaskRoundTrip(t *testing.T) {
	tc, url, m := startTaskLabMux(t)
	a, b := connectTasks(t, url), connectTasks(t, url)
	awaitGETStream(t, m, a)
	awaitGETStream(t, m, b)
	task := startTask(t, a, "lab__slow")
	testsupport.WaitFor(t, "the child's task", func() bool { return len(tc.childTasks()) == 1 })
	if child := tc.childTasks()[0]; child == task.TaskId {
		t.Fatalf("the client sees the child's task id %s", child)
	}
	if got := getTask(t, a, task.TaskId); got.Status != mcp.TaskStatusWorking {
		t.Fatalf("tasks/get while running: %+v", got)
	}
	close(tc.release)
	waitStatus(t, a, task.TaskId, mcp.TaskStatusCompleted)
	raw := testsupport.MustRPC(t, a.Client, "tasks/result", taskRef(task.TaskId))
	var res struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		Meta              map[string]any   `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	related, _ := res.Meta[mcp.RelatedTaskMetaKey].(map[string]any)
	if len(res.Content) != 1 || res.Content[0]["text"] != "done" || res.StructuredContent["answer"] != float64(42) ||
		res.Meta["x-child"] != "kept" || related["taskId"] != task.TaskId {
		t.Fatalf("tasks/result %s; want the child's result tied to task %s", raw, task.TaskId)
	}
	n := a.Notification(mcp.MethodNotificationTasksStatus)
	if n.Params.AdditionalFields["taskId"] != task.TaskId || n.Params.AdditionalFields["status"] != string(mcp.TaskStatusCompleted) {
		t.Fatalf("status notification %+v", n.Params.AdditionalFields)
	}
	if _, marked := n.Params.AdditionalFields[upstream.OwnMark]; marked {
		t.Fatalf("the mark left the mux: %+v", n.Params.AdditionalFields)
	}
	// b's own task's notification comes after anything sent to b before
	// it, so a's, had it been sent to b, would come first.
	mine := startTask(t, b, "lab__slow") // tc.release is closed: it ends at once
	n = b.Notification(mcp.MethodNotificationTasksStatus)
	if id := n.Params.AdditionalFields["taskId"]; id != mine.TaskId {
		t.Fatalf("session b was told of task %v; its own is %s", id, mine.TaskId)
	}
}

// Two sessions of the same identity cannot see, read, wait for or cancel
// each other's tasks; a 2026-07-28 request sees none either.
func TestTaskSessionsIsolated(t *testing.T) {
	tc, url := startTaskLab(t)
	defer close(tc.release)
	a, b := connectTasks(t, url), connectTasks(t, url)
	task := startTask(t, a, "lab__slow")
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if _, rerr := testsupport.RPC(t, b.Client, method, taskRef(task.TaskId)); rerr == nil || !strings.Contains(rerr.Message, "not found") {
			t.Errorf("%s of another session's task: %v; want not found", method, rerr)
		}
	}
	listed := func(c *testsupport.Conn) bool {
		var l mcp.ListTasksResult
		_ = json.Unmarshal(testsupport.MustRPC(t, c.Client, "tasks/list", map[string]any{}), &l)
		for _, x := range l.Tasks {
			if x.TaskId == task.TaskId {
				return true
			}
		}
		return false
	}
	if !listed(a) || listed(b) {
		t.Fatalf("tasks/list: a sees its task %t, b sees it %t", listed(a), listed(b))
	}
	modern := testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Version: mcp.ProtocolVersion20260728})
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	if got, err := modern.Client.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}}); err == nil {
		t.Fatalf("a 2026-07-28 request read another session's task: %+v", got)
	}
	if got := getTask(t, a, task.TaskId); got.Status != mcp.TaskStatusWorking {
		t.Fatalf("a's task after b's attempts: %+v", got)
	}
}

// tasks/cancel from the client cancels the child's task.
func TestTaskCancelReachesChild(t *testing.T) {
	tc, url := startTaskLab(t)
	a := connectTasks(t, url)
	task := startTask(t, a, "lab__slow")
	testsupport.WaitFor(t, "the child's task", func() bool { return len(tc.childTasks()) == 1 })
	var res mcp.CancelTaskResult
	if err := json.Unmarshal(testsupport.MustRPC(t, a.Client, "tasks/cancel", taskRef(task.TaskId)), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != mcp.TaskStatusCancelled {
		t.Fatalf("tasks/cancel: %+v", res)
	}
	select {
	case id := <-tc.cancelled:
		if id != tc.childTasks()[0] {
			t.Fatalf("the child cancelled task %s; its task is %s", id, tc.childTasks()[0])
		}
	case <-time.After(testsupport.Wait):
		t.Fatal("the child's task was never cancelled")
	}
}

// A child task that fails fails the client's task with the child's
// reason; a call of an optional-task tool without augmentation stays a
// plain call; a task-required tool called plainly is refused.
func TestTaskFailedAndPlain(t *testing.T) {
	tc, url := startTaskLab(t)
	a := connectTasks(t, url)
	task := startTask(t, a, "lab__fail")
	waitStatus(t, a, task.TaskId, mcp.TaskStatusFailed)
	if got := getTask(t, a, task.TaskId); !strings.Contains(got.StatusMessage, "the child's own failure") {
		t.Fatalf("failed task's message %q", got.StatusMessage)
	}
	if _, rerr := testsupport.RPC(t, a.Client, "tasks/result", taskRef(task.TaskId)); rerr == nil {
		t.Fatal("tasks/result of a failed task answered a result")
	}
	res, err := a.Call("lab__quick", map[string]any{})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("plain call of an optional-task tool: %+v, %v", res, err)
	}
	if tc.plain != 1 || len(tc.childTasks()) != 1 {
		t.Fatalf("the child saw %d plain calls and tasks %v; want 1 and only fail's", tc.plain, tc.childTasks())
	}
	if _, rerr := testsupport.RPC(t, a.Client, "tools/call", map[string]any{"name": "lab__slow", "arguments": map[string]any{}}); rerr == nil {
		t.Fatal("a plain call of a task-required tool was not refused")
	}
}

// A child that goes away while its task runs fails the client's task, and
// the call is not sent again.
func TestTaskInterruptedByChildLoss(t *testing.T) {
	tc, url := startTaskLab(t)
	a := connectTasks(t, url)
	task := startTask(t, a, "lab__slow")
	testsupport.WaitFor(t, "the child's task", func() bool { return len(tc.childTasks()) == 1 })
	tc.hs.CloseClientConnections()
	tc.hs.Close()
	waitStatus(t, a, task.TaskId, mcp.TaskStatusFailed)
	if got := getTask(t, a, task.TaskId); !strings.Contains(got.StatusMessage, "went away") {
		t.Fatalf("interrupted task's message %q", got.StatusMessage)
	}
	if n := len(tc.childTasks()); n != 1 {
		t.Fatalf("the child got %d tasks; a write interrupted is never re-run", n)
	}
	close(tc.release)
}

// A 2026-07-28 request asking for a task gets a plain call: mcp-go could
// keep its task in no session, and that era has no tasks/result.
func TestTaskModernEraRunsPlain(t *testing.T) {
	tc, url := startTaskLab(t)
	modern := testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Version: mcp.ProtocolVersion20260728})
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	call := func(name string) (*mcp.CallToolResult, error) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Task = name, &mcp.TaskParams{}
		return modern.Client.CallTool(ctx, req)
	}
	if res, err := call("lab__quick"); err != nil || len(res.Content) != 1 {
		t.Fatalf("optional-task tool asked for a task over 2026-07-28: %+v, %v; want its plain result", res, err)
	}
	if _, err := call("lab__slow"); err == nil {
		t.Fatal("a task-required tool ran for a 2026-07-28 request")
	}
	if n := len(tc.childTasks()); n != 0 {
		t.Fatalf("the child got %d tasks", n)
	}
}

// In search mode, a task-augmented call_tool of a tool whose tasks are
// optional runs at the child as a task of that tool, as a direct
// task-augmented call of it does; without a task it is a plain call of
// it. call_tool is listed as optional for tasks, find_tools without
// tasks. Its status notification reaches the session that owns the task.
func TestTaskThroughCallToolOptional(t *testing.T) {
	tc := newTaskChild()
	spec := tc.spec()
	spec.muxLines = `catalog = "search"`
	m := startLab(t, spec)
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })
	a := connectTasks(t, url)
	awaitGETStream(t, m, a)
	defs := map[string]string{}
	for _, raw := range testsupport.ListAll(t, a.Client, "tools/list", "tools") {
		var w struct{ Name string }
		_ = json.Unmarshal(raw, &w)
		defs[w.Name] = string(raw)
	}
	if !strings.Contains(defs["mcpmux__call_tool"], `"execution":{"taskSupport":"optional"}`) || strings.Contains(defs["mcpmux__find_tools"], `"execution":{"taskSupport"`) {
		t.Fatalf("search mode lists %v", defs)
	}
	through := func(task bool) map[string]any {
		p := map[string]any{"name": "mcpmux__call_tool", "arguments": map[string]any{"name": "lab__quick"}}
		if task {
			p["task"] = map[string]any{"ttl": 60000}
		}
		return p
	}
	var ct struct {
		Task mcp.Task `json:"task"`
	}
	raw := testsupport.MustRPC(t, a.Client, "tools/call", through(true))
	if err := json.Unmarshal(raw, &ct); err != nil || ct.Task.TaskId == "" {
		t.Fatalf("a task-augmented call_tool of lab__quick answered %s (%v), not a task", raw, err)
	}
	waitStatus(t, a, ct.Task.TaskId, mcp.TaskStatusCompleted)
	res := testsupport.MustRPC(t, a.Client, "tasks/result", taskRef(ct.Task.TaskId))
	if !strings.Contains(string(res), `"text":"quick"`) || !strings.Contains(string(res), ct.Task.TaskId) {
		t.Fatalf("tasks/result %s", res)
	}
	if n := a.Notification(mcp.MethodNotificationTasksStatus); n.Params.AdditionalFields["taskId"] != ct.Task.TaskId {
		t.Fatalf("status notification %+v", n.Params.AdditionalFields)
	}
	if got := len(tc.childTasks()); got != 1 {
		t.Fatalf("the child ran %d tasks; want the one of call_tool", got)
	}
	plain := testsupport.MustRPC(t, a.Client, "tools/call", through(false))
	if strings.Contains(string(plain), `"task"`) || !strings.Contains(string(plain), `"text":"quick"`) {
		t.Fatalf("call_tool of lab__quick without a task answered %s", plain)
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	// The task's run does not count as plain: its handler runs once per
	// call either way, so count the calls: the task's and the plain one.
	if tc.plain != 2 || len(tc.created) != 1 {
		t.Fatalf("the child saw %d runs of quick and tasks %v; want 2 runs, 1 task", tc.plain, tc.created)
	}
}
