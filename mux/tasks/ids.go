package tasks

// Task ids across replicas. With several replicas (package replicas), the
// id a client is handed for a task names the replica that runs it: the id
// mcp-go minted, with this process's boot id, the task's createdAt and
// ttl, sealed under the replicas' shared key (IDs). A 2025-11-25 session's
// requests reach the replica that owns the session, so a task's own
// session always asks its owner. What this file adds is the answer to a
// client that lost that session with its replica (a 404, after which it
// initializes again, as the protocol says) and asks a replica of its new
// session about the old task: a task whose owner is gone, or that ran on
// an earlier process of its replica (this one or another), reads failed,
// with the reason, rather than "not found"; an id that does not open with
// the key is refused as not one of this deployment's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// IDs seals the task ids handed out with several replicas, and opens them.
type IDs interface {
	// Seal returns the id handed out for local, naming this replica.
	Seal(local string) string
	// Open returns the replica an id names (its advertised peer address)
	// and the local id sealed in it; an error for an id that does not
	// open with the keys in force.
	Open(id string) (owner, local string, err error)
	// Self is this replica's advertised peer address.
	Self() string
	// Boot is this process's random id, sealed in each task id: a task
	// id of another process of the same replica names a task that went
	// with that process.
	Boot() string
	// Gone returns nil when owner, another replica, still runs the
	// process boot; otherwise why it is gone (not among the peers, not
	// reachable, or restarted since). It waits a bounded time, at most
	// until ctx ends.
	Gone(ctx context.Context, owner, boot string) error
}

// ErrBadTaskID is what a task id that does not open with the replicas'
// keys is refused with.
var ErrBadTaskID = errors.New("the task id is not one this deployment issued: it does not open with the replicas' current or previous key")

// sealedLocal is what a task's sealed id holds: the boot id, the
// createdAt (Unix milliseconds), the ttl ("-" for none) and mcp-go's id.
type sealedLocal struct {
	boot    string
	created time.Time
	ttl     *int64
	id      string
}

func (s sealedLocal) String() string {
	ttl := "-"
	if s.ttl != nil {
		ttl = strconv.FormatInt(*s.ttl, 10)
	}
	return s.boot + "." + strconv.FormatInt(s.created.UnixMilli(), 10) + "." + ttl + "." + s.id
}

func parseSealedLocal(local string) (sealedLocal, bool) {
	parts := strings.SplitN(local, ".", 4)
	if len(parts) != 4 {
		return sealedLocal{}, false
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return sealedLocal{}, false
	}
	s := sealedLocal{boot: parts[0], created: time.UnixMilli(ms).UTC(), id: parts[3]}
	if parts[2] != "-" {
		ttl, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return sealedLocal{}, false
		}
		s.ttl = &ttl
	}
	return s, true
}

// outID returns the id the client sees for t: mcp-go's without replicas;
// with them, sealed once, the first time it is asked for, with the ttl
// known by then (the creation's answer sets it before it goes out).
func (tt *Table) outID(t *Task) string {
	if tt.ids == nil {
		return t.id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sealed == "" {
		t.sealed = tt.ids.Seal(sealedLocal{boot: tt.boot, created: t.createdAt, ttl: t.ttl, id: t.id}.String())
	}
	return t.sealed
}

// outIDOf is outID for the task mcp-go knows as local; local itself for
// one the table does not hold.
func (tt *Table) outIDOf(local string) string {
	if t := tt.lookup(local); t != nil {
		return tt.outID(t)
	}
	return local
}

// localID returns mcp-go's id for id, one a client sent: id itself
// without replicas; with them, the local id of a task this process
// sealed, "" for any other (mcp-go answers "" as a task it does not have).
func (tt *Table) localID(id string) string {
	if tt.ids == nil {
		return id
	}
	owner, local, err := tt.ids.Open(id)
	if err != nil || owner != tt.ids.Self() {
		return ""
	}
	s, ok := parseSealedLocal(local)
	if !ok || s.boot != tt.boot {
		return ""
	}
	return s.id
}

// Foreign returns how to answer f, a tasks/get, tasks/result or
// tasks/cancel of a 2025-11-25 session of this replica's, when its task
// id is not one of this process's: nil without replicas, for another
// request, and for a task id this process sealed (mcp-go's store answers
// it). A task whose owner is gone, or that ran on an earlier process of
// its replica (IDs.Gone asks another replica for its boot id), has failed: tasks/get answers it failed with the reason in
// its statusMessage, tasks/result with the error its call ended with (as
// for any failed task), tasks/cancel that it is already over. A task
// whose replica still runs the process that made it belongs to a session
// of that replica's: "task not found", as for any other session's task. An id
// that does not open is refused with ErrBadTaskID.
func (tt *Table) Foreign(u *upstream.Session, f *frame.Frame) func(ctx context.Context) []byte {
	if tt.ids == nil || u == nil || f.Kind != frame.Request {
		return nil
	}
	switch mcp.MCPMethod(f.Method) {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksCancel:
	default:
		return nil
	}
	var params struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(f.Params, &params) != nil || params.TaskID == "" {
		return nil // mcp-go refuses it
	}
	owner, local, err := tt.ids.Open(params.TaskID)
	if err != nil {
		return func(context.Context) []byte {
			return frame.ErrorAnswer(f.ID, &frame.Error{Code: mcp.INVALID_PARAMS, Message: ErrBadTaskID.Error()})
		}
	}
	s, ok := parseSealedLocal(local)
	if !ok { // sealed by mcpmux, so cannot happen; named as nothing
		return func(context.Context) []byte { return notFound(f.ID) }
	}
	if owner == tt.ids.Self() && s.boot == tt.boot {
		return nil
	}
	return func(ctx context.Context) []byte {
		var why string
		if owner == tt.ids.Self() {
			why = "the replica that owns it is gone: " + owner + " (this replica) has restarted since, and the task went with its earlier process"
		} else if err := tt.ids.Gone(ctx, owner, s.boot); err != nil {
			why = err.Error()
		} else {
			return notFound(f.ID)
		}
		tt.log.Info().Str("task", s.id).Str("owner", owner).Str("method", f.Method).Msg("answered a task whose replica is gone as failed")
		return goneAnswer(f, params.TaskID, s, why)
	}
}

// notFound is mcp-go's answer for a task it does not have.
func notFound(id []byte) []byte {
	return frame.ErrorAnswer(id, &frame.Error{Code: mcp.INVALID_PARAMS, Message: "task not found"})
}

// goneAnswer answers f for the task id, whose run was lost with its
// replica (why).
func goneAnswer(f *frame.Frame, id string, s sealedLocal, why string) []byte {
	msg := "the task failed: " + why + "; its run and result were lost"
	switch mcp.MCPMethod(f.Method) {
	case mcp.MethodTasksResult:
		return frame.ErrorAnswer(f.ID, &frame.Error{Code: mcp.INTERNAL_ERROR, Message: msg})
	case mcp.MethodTasksCancel:
		return frame.ErrorAnswer(f.ID, &frame.Error{Code: mcp.INVALID_PARAMS,
			Message: "cannot cancel a task in a terminal status: " + msg})
	}
	task := mcp.Task{TaskId: id, Status: mcp.TaskStatusFailed, StatusMessage: msg,
		CreatedAt: s.created.Format(time.RFC3339), LastUpdatedAt: time.Now().UTC().Format(time.RFC3339), TTL: s.ttl}
	b, err := json.Marshal(task)
	if err != nil { // a Task always marshals
		return frame.ErrorAnswer(f.ID, &frame.Error{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("task %s: %v", id, err)})
	}
	return frame.Result(f.ID, b)
}
