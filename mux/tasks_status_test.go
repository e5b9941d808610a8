package mux

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/tasks"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// statusChild is a real mcp-go child whose tasks report a state of their
// own through tasks/get (mcp-go's store knows only working and the end, so
// the child's own hooks answer what the task says of itself), and what it
// saw of mcpmux's questions.
type statusChild struct {
	release chan struct{} // closed: hold's runs finish

	mu     sync.Mutex
	state  mcp.Task // Status "" leaves mcp-go's answer alone
	refuse bool     // tasks/get answers "not found"
	asked  int      // tasks/get the child got
	// hang, when set, holds each tasks/get until it is closed.
	hang chan struct{}
}

func (sc *statusChild) set(status mcp.TaskStatus, message string, poll int64) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.state = mcp.Task{Status: status, StatusMessage: message}
	if poll > 0 {
		sc.state.PollInterval = &poll
	}
}

func (sc *statusChild) setRefuse(refuse bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.refuse = refuse
}

func (sc *statusChild) timesAsked() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.asked
}

// spec: hold (task required) runs until released; ask (task required)
// says input_required, asks its client for a name by elicitation and
// answers with it.
func (sc *statusChild) spec() labSpec {
	hooks := &server.Hooks{}
	hooks.AddBeforeGetTask(func(_ context.Context, _ any, req *mcp.GetTaskRequest) {
		sc.mu.Lock()
		sc.asked++
		if sc.refuse {
			req.Params.TaskId = ""
		}
		hang := sc.hang
		sc.mu.Unlock()
		if hang != nil {
			<-hang
		}
	})
	hooks.AddAfterGetTask(func(_ context.Context, _ any, _ *mcp.GetTaskRequest, res *mcp.GetTaskResult) {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		if res != nil && sc.state.Status != "" && !res.Status.IsTerminal() {
			res.Status, res.StatusMessage, res.PollInterval = sc.state.Status, sc.state.StatusMessage, sc.state.PollInterval
		}
	})
	hold := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-sc.release
		return mcp.NewToolResultText("held"), nil
	}
	ask := func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sc.set(mcp.TaskStatusInputRequired, "waiting for your name", 0)
		// mcp-go ends a task handler's context with the creating request.
		res, err := server.ServerFromContext(ctx).RequestElicitation(context.WithoutCancel(ctx), mcp.ElicitationRequest{
			Params: mcp.ElicitationParams{Message: "your name?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}},
		})
		sc.set(mcp.TaskStatusWorking, "thanks", 0)
		if err != nil {
			return nil, err
		}
		content, _ := res.Content.(map[string]any)
		return mcp.NewToolResultText("hello " + content["name"].(string)), nil
	}
	return labSpec{
		allow:     []string{"reader"},
		childOpts: []server.ServerOption{server.WithTaskCapabilities(true, true, true), server.WithHooks(hooks)},
		tools: []server.ServerTool{
			{Tool: mcp.NewTool("hold", mcp.WithTaskSupport(mcp.TaskSupportRequired)), Handler: hold},
			{Tool: mcp.NewTool("ask", mcp.WithTaskSupport(mcp.TaskSupportRequired)), Handler: ask},
		},
	}
}

func startStatusLab(t *testing.T, muxLines string) (*statusChild, string) {
	sc := &statusChild{release: make(chan struct{})}
	spec := sc.spec()
	spec.muxLines = muxLines
	m := startLab(t, spec)
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })
	return sc, url
}

func listTask(t *testing.T, c *testsupport.Conn, id string) (mcp.Task, bool) {
	t.Helper()
	var l mcp.ListTasksResult
	if err := json.Unmarshal(testsupport.MustRPC(t, c.Client, "tasks/list", map[string]any{}), &l); err != nil {
		t.Fatal(err)
	}
	for _, x := range l.Tasks {
		if x.TaskId == id {
			return x, true
		}
	}
	return mcp.Task{}, false
}

// tasks/get and tasks/list show the child's statusMessage and pollInterval
// while the task runs, under mcpmux's task id; a child that cannot answer
// leaves the task as mcpmux has it; the child's terminal status is never
// shown before mcpmux's own, which arrives with the result.
func TestTaskStatusFromChild(t *testing.T) {
	sc, url := startStatusLab(t, "")
	a, b := connectTasks(t, url), connectTasks(t, url)
	task := startTask(t, a, "lab__hold")
	sc.set(mcp.TaskStatusWorking, "step 1 of 3", 250)
	// The child's task exists once the child answered mcpmux's call.
	testsupport.WaitFor(t, "the child's statusMessage", func() bool { return getTask(t, a, task.TaskId).StatusMessage == "step 1 of 3" })

	sc.set(mcp.TaskStatusWorking, "step 2 of 3", 750)
	for name, got := range map[string]func() mcp.Task{
		"tasks/get":  func() mcp.Task { return getTask(t, a, task.TaskId) },
		"tasks/list": func() mcp.Task { x, _ := listTask(t, a, task.TaskId); return x },
	} {
		x := got()
		if x.TaskId != task.TaskId || x.Status != mcp.TaskStatusWorking || x.StatusMessage != "step 2 of 3" ||
			x.PollInterval == nil || *x.PollInterval != 750 || x.CreatedAt != task.CreatedAt {
			t.Errorf("%s: %+v; want mcpmux's task %s with the child's step 2 and pollInterval 750", name, x, task.TaskId)
		}
	}
	if _, seen := listTask(t, b, task.TaskId); seen {
		t.Error("another session lists the task")
	}
	if _, rerr := testsupport.RPC(t, b.Client, "tasks/get", taskRef(task.TaskId)); rerr == nil || !strings.Contains(rerr.Message, "not found") {
		t.Errorf("tasks/get of another session's task: %v; want not found", rerr)
	}

	// The child refuses: the task is answered as mcpmux has it.
	sc.setRefuse(true)
	before := sc.timesAsked()
	if x := getTask(t, a, task.TaskId); x.Status != mcp.TaskStatusWorking || x.StatusMessage != "" || sc.timesAsked() == before {
		t.Errorf("tasks/get with the child refusing: %+v (child asked %t); want mcpmux's working, no message",
			x, sc.timesAsked() > before)
	}
	sc.setRefuse(false)

	// The child says completed before mcpmux's run has its result.
	sc.set(mcp.TaskStatusCompleted, "all done", 0)
	before = sc.timesAsked()
	if x := getTask(t, a, task.TaskId); x.Status != mcp.TaskStatusWorking || sc.timesAsked() == before {
		t.Errorf("tasks/get with the child's task said completed: %+v (child asked %t); want working", x, sc.timesAsked() > before)
	}
	if x, _ := listTask(t, a, task.TaskId); x.Status != mcp.TaskStatusWorking {
		t.Errorf("tasks/list with the child's task said completed: %+v; want working", x)
	}
	close(sc.release)
	waitStatus(t, a, task.TaskId, mcp.TaskStatusCompleted)
	raw := testsupport.MustRPC(t, a.Client, "tasks/result", taskRef(task.TaskId))
	if !strings.Contains(string(raw), "held") {
		t.Fatalf("tasks/result %s", raw)
	}
}

// elicit answers an elicitation with a name once let go, and says when it
// was asked.
type elicit struct {
	asked chan string
	let   chan struct{}
}

func (e elicit) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.asked <- req.Params.Message
	<-e.let
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "ada"}}}, nil
}

// A child task that asks for elicitation shows input_required at the
// client, whose elicitation is relayed to it and whose answer resolves the
// task: tasks/result answers the child's result. With and without the
// client's GET stream.
func TestTaskInputRequiredThroughResult(t *testing.T) {
	for _, listen := range []bool{true, false} {
		t.Run(map[bool]string{true: "GET stream", false: "POSTs only"}[listen], func(t *testing.T) { taskInputRequired(t, listen) })
	}
}

func taskInputRequired(t *testing.T, listen bool) {
	_, url := startStatusLab(t, "")
	e := elicit{asked: make(chan string, 1), let: make(chan struct{})}
	var letOnce sync.Once
	let := func() { letOnce.Do(func() { close(e.let) }) }
	t.Cleanup(let)
	a := testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Version: mcp.ProtocolVersion20251125, Listen: listen,
		Options: []client.ClientOption{client.WithElicitationHandler(e)}})
	task := startTask(t, a, "lab__ask")
	waitStatus(t, a, task.TaskId, mcp.TaskStatusInputRequired)
	if x := getTask(t, a, task.TaskId); x.StatusMessage != "waiting for your name" {
		t.Errorf("input_required task's message %q", x.StatusMessage)
	}
	if x, _ := listTask(t, a, task.TaskId); x.Status != mcp.TaskStatusInputRequired {
		t.Errorf("tasks/list: %+v; want input_required", x)
	}
	result := make(chan json.RawMessage, 1)
	go func() {
		raw, rerr := testsupport.RPC(t, a.Client, "tasks/result", taskRef(task.TaskId))
		if rerr != nil {
			t.Errorf("tasks/result: %v", rerr)
		}
		result <- raw
	}()
	select {
	case msg := <-e.asked:
		if msg != "your name?" {
			t.Errorf("the client was asked %q", msg)
		}
	case <-time.After(testsupport.Wait):
		t.Fatal("the child's elicitation never reached the client")
	}
	let()
	if raw := <-result; !strings.Contains(string(raw), "hello ada") {
		t.Fatalf("tasks/result %s; want the child's answer with the client's name", raw)
	}
	if x := getTask(t, a, task.TaskId); x.Status != mcp.TaskStatusCompleted {
		t.Fatalf("after tasks/result: %+v", x)
	}
}

// A child that does not answer tasks/get within call_timeout (here 1s,
// under the 5s bound) leaves the task as mcpmux has it.
func TestTaskStatusChildSilent(t *testing.T) {
	sc, url := startStatusLab(t, `call_timeout = "1s"`)
	a := connectTasks(t, url)
	task := startTask(t, a, "lab__hold")
	sc.set(mcp.TaskStatusWorking, "step 1 of 3", 0)
	testsupport.WaitFor(t, "the child's statusMessage", func() bool { return getTask(t, a, task.TaskId).StatusMessage == "step 1 of 3" })
	hang := make(chan struct{})
	sc.mu.Lock()
	sc.hang = hang
	sc.mu.Unlock()
	before := sc.timesAsked()
	x := getTask(t, a, task.TaskId)
	asked := sc.timesAsked() > before
	close(hang)
	if x.Status != mcp.TaskStatusWorking || x.StatusMessage != "" || !asked {
		t.Errorf("tasks/get with the child silent: %+v (child asked %t); want mcpmux's working, no message", x, asked)
	}
	close(sc.release)
	waitStatus(t, a, task.TaskId, mcp.TaskStatusCompleted)
}

// A tasks/list over many working tasks asks their child at most
// tasks.ChildStatusFanout questions at a time: with the child answering none
// within call_timeout, exactly that many reach it, and the list still
// answers, with mcpmux's own status for every task.
func TestTaskStatusFanoutBounded(t *testing.T) {
	sc, url := startStatusLab(t, `call_timeout = "1s"`)
	a := connectTasks(t, url)
	sc.set(mcp.TaskStatusWorking, "step 1", 0)
	started := make([]mcp.Task, 2*tasks.ChildStatusFanout+1)
	for i := range started {
		started[i] = startTask(t, a, "lab__hold")
		// Asked alone, so that the child's task is known to be there.
		testsupport.WaitFor(t, "the child's task", func() bool { return getTask(t, a, started[i].TaskId).StatusMessage == "step 1" })
	}
	hang := make(chan struct{})
	sc.mu.Lock()
	sc.hang = hang
	sc.mu.Unlock()
	before := sc.timesAsked()
	var l mcp.ListTasksResult
	if err := json.Unmarshal(testsupport.MustRPC(t, a.Client, "tasks/list", map[string]any{}), &l); err != nil {
		t.Fatal(err)
	}
	asked := sc.timesAsked() - before
	close(hang)
	if asked != tasks.ChildStatusFanout {
		t.Errorf("the child was asked %d times for %d working tasks; want %d", asked, len(started), tasks.ChildStatusFanout)
	}
	if len(l.Tasks) != len(started) {
		t.Fatalf("tasks/list has %d tasks; want %d", len(l.Tasks), len(started))
	}
	for _, x := range l.Tasks {
		if x.Status != mcp.TaskStatusWorking || x.StatusMessage != "" {
			t.Errorf("task %s: %s %q; want mcpmux's working, no message", x.TaskId, x.Status, x.StatusMessage)
		}
	}
	close(sc.release)
	for _, task := range started {
		waitStatus(t, a, task.TaskId, mcp.TaskStatusCompleted)
	}
}
