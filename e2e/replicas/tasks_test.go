package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// taskLab is a lab whose child "jobs" runs task_wait only as a task, run
// as 3 replicas behind HAProxy.
func taskLab(t *testing.T) (*ts.Replicas, *ts.HAProxy) {
	lab := ts.NewLab(t, "", ts.Server{Alias: "jobs", Env: map[string]string{"LAB_TASKS": "1"}, Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	rs := ts.StartReplicas(t, lab, 3)
	return rs, ts.StartHAProxy(t, lab.Dir, rs.Public)
}

func legacyClient(t *testing.T, url string) *ts.Conn {
	return ts.ConnectHTTP(t, url, ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION})
}

func startTask(t *testing.T, c *ts.Conn, tag string) mcp.Task {
	t.Helper()
	raw := ts.MustRPC(t, c.Client, "tools/call", map[string]any{"name": "jobs__task_wait",
		"arguments": map[string]any{"tag": tag}, "task": map[string]any{"ttl": 600000}})
	var ct struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(raw, &ct); err != nil || ct.Task.TaskId == "" {
		t.Fatalf("a task-augmented task_wait answered %s (%v), not a task", raw, err)
	}
	return ct.Task
}

func getTask(t *testing.T, c *ts.Conn, id string) (mcp.Task, *ts.RPCError) {
	t.Helper()
	raw, rerr := ts.RPC(t, c.Client, "tasks/get", map[string]any{"taskId": id})
	var task mcp.Task
	if rerr == nil {
		if err := json.Unmarshal(raw, &task); err != nil {
			t.Fatalf("tasks/get answered %s: %v", raw, err)
		}
	}
	return task, rerr
}

// A task's id names the replica that runs it, as its session's id does,
// and its requests are answered wherever round robin sends them. Once
// that replica is SIGKILLed, the session answers 404; in the session the
// client initializes again (on another replica), tasks/get reads the
// task failed, naming the gone replica, tasks/result answers the error the
// task ended with and tasks/cancel that it is over; after the replica
// comes back on the same address, it reads its earlier process's task
// failed too, there and on the others. A task id that does not open with the key is refused as not
// one of the deployment's, and nothing waits: every request has ts.Wait.
func TestTaskOfKilledReplica(t *testing.T) {
	t.Parallel()
	rs, lb := taskLab(t)
	c := legacyClient(t, lb.URL())
	owner := rs.OwnerOf("session", sessionID(c))
	task := startTask(t, c, "lost")
	if got := rs.OwnerOf("task", task.TaskId); got != owner {
		t.Fatalf("the task names replica %d, its session replica %d", got, owner)
	}
	// Through HAProxy, round robin: most land on another replica and are
	// forwarded with the session.
	for i := range 3 {
		got, rerr := getTask(t, c, task.TaskId)
		if rerr != nil || got.Status != mcp.TaskStatusWorking || got.TaskId != task.TaskId {
			t.Fatalf("tasks/get %d of a working task: %+v %v", i, got, rerr)
		}
	}
	forged := task.TaskId[:len(task.TaskId)-4] + "AAAA"
	if _, rerr := getTask(t, c, forged); rerr == nil || rerr.Code != mcp.INVALID_PARAMS ||
		!strings.Contains(rerr.Message, "does not open with the replicas' current or previous key") {
		t.Errorf("tasks/get of a task id with a bad seal: %v", rerr)
	}

	rs.Kill(owner)

	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	_, err := c.Client.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0",
		ID: mcp.NewRequestId("old-session"), Method: "tasks/get", Params: map[string]any{"taskId": task.TaskId}})
	cancel()
	if !errors.Is(err, transport.ErrSessionTerminated) {
		t.Errorf("tasks/get in the killed replica's session: %v, want 404 (session terminated)", err)
	}
	again := legacyClient(t, lb.URL())
	if rs.OwnerOf("session", sessionID(again)) == owner {
		t.Fatal("a session initialized again is the killed replica's")
	}
	got, rerr := getTask(t, again, task.TaskId)
	if rerr != nil || got.Status != mcp.TaskStatusFailed || got.TaskId != task.TaskId ||
		!strings.Contains(got.StatusMessage, "the replica that owns it is gone") || !strings.Contains(got.StatusMessage, rs.Peer[owner]) {
		t.Errorf("tasks/get of the killed replica's task in a new session: %+v %v", got, rerr)
	}
	if got.CreatedAt != task.CreatedAt || got.LastUpdatedAt == "" || got.TTL == nil || *got.TTL != *task.TTL {
		t.Errorf("the failed task's times and ttl: %+v, created as %+v", got, task)
	}
	if _, rerr := ts.RPC(t, again.Client, "tasks/result", map[string]any{"taskId": task.TaskId}); rerr == nil ||
		rerr.Code != mcp.INTERNAL_ERROR || !strings.Contains(rerr.Message, "gone") {
		t.Errorf("tasks/result of the killed replica's task: %v", rerr)
	}
	if _, rerr := ts.RPC(t, again.Client, "tasks/cancel", map[string]any{"taskId": task.TaskId}); rerr == nil ||
		rerr.Code != mcp.INVALID_PARAMS || !strings.Contains(rerr.Message, "terminal") {
		t.Errorf("tasks/cancel of the killed replica's task: %v", rerr)
	}

	rs.Start(owner)
	rs.WaitReady(owner)
	direct := legacyClient(t, "http://"+rs.Public[owner]+"/mcp")
	got, rerr = getTask(t, direct, task.TaskId)
	if rerr != nil || got.Status != mcp.TaskStatusFailed || !strings.Contains(got.StatusMessage, "has restarted since") {
		t.Errorf("tasks/get of its earlier process's task on the restarted replica: %+v %v", got, rerr)
	}
	// And on another replica, which asks the restarted one for its boot id.
	got, rerr = getTask(t, again, task.TaskId)
	if rerr != nil || got.Status != mcp.TaskStatusFailed || !strings.Contains(got.StatusMessage, rs.Peer[owner]+" has restarted since") {
		t.Errorf("tasks/get of the restarted replica's earlier task on another replica: %+v %v", got, rerr)
	}
	// A task of a live replica's session, asked in another session: not
	// found, as on one replica.
	live := startTask(t, again, "kept")
	other := legacyClient(t, "http://"+rs.Public[(rs.OwnerOf("task", live.TaskId)+1)%3]+"/mcp")
	if _, rerr := getTask(t, other, live.TaskId); rerr == nil || rerr.Message != "task not found" {
		t.Errorf("tasks/get of another session's task on another replica: %v", rerr)
	}
	// Every answer about it names it by its sealed id.
	var list mcp.ListTasksResult
	if err := json.Unmarshal(ts.MustRPC(t, again.Client, "tasks/list", map[string]any{}), &list); err != nil ||
		len(list.Tasks) != 1 || list.Tasks[0].TaskId != live.TaskId {
		t.Errorf("tasks/list: %+v (%v), want only %s", list.Tasks, err, live.TaskId)
	}
	var cancelled mcp.Task
	if err := json.Unmarshal(ts.MustRPC(t, again.Client, "tasks/cancel", map[string]any{"taskId": live.TaskId}), &cancelled); err != nil ||
		cancelled.TaskId != live.TaskId || cancelled.Status != mcp.TaskStatusCancelled {
		t.Errorf("tasks/cancel: %+v (%v)", cancelled, err)
	}
}
