package child

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/mux/child/link"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The child side of a task-augmented call: the task created at the child,
// followed until its result, and cancelled there when the call ends first.

// TaskCall is what a call run as a task carries in its context: the
// augmentation to send the child, and how the child's task ended.
type TaskCall struct {
	Params *mcp.TaskParams
	// Failed is set when the child's task failed or was cancelled at the
	// child: the upstream task then fails with it.
	Failed error

	Run TaskRun // the upstream task the call runs as

	mu       sync.Mutex
	followed *ChildTask // the child's task, once the child created it
}

// ChildTask is a child's own task, on the session that created it.
type ChildTask struct {
	s  *Session
	id string
}

// Followed returns the child's task of tc, or nil before there is one.
func (tc *TaskCall) Followed() *ChildTask {
	if tc == nil {
		return nil
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.followed
}

// Status asks the child for its task as it is now.
func (ct *ChildTask) Status(ctx context.Context) (mcp.Task, error) {
	select {
	case <-ct.s.lost:
		return mcp.Task{}, fmt.Errorf("task %s: the session is gone: %s", ct.id, ct.s.lostWhy)
	default:
	}
	raw, err := ct.s.send(ctx, ct.s.nextID(), string(mcp.MethodTasksGet), map[string]any{"taskId": ct.id})
	if err != nil {
		return mcp.Task{}, fmt.Errorf("task %s: tasks/get: %w", ct.id, err)
	}
	var st mcp.Task
	if err := json.Unmarshal(raw, &st); err != nil {
		return mcp.Task{}, fmt.Errorf("task %s: %w: tasks/get: %v", ct.id, ErrMalformedResult, err)
	}
	return st, nil
}

// taskParams is the augmentation of a tools/call sent for tc; nil for a
// plain call.
func (tc *TaskCall) taskParams() *mcp.TaskParams {
	if tc == nil {
		return nil
	}
	return tc.Params
}

// childTaskPoll is how often a child's task is polled when its tasks/result
// does not wait for the end and the child suggests no pollInterval.
const childTaskPoll = time.Second

// callTask sends a task-augmented tools/call and follows the task the
// child creates to its end. The creation is waited for even when ctx ends
// meanwhile (up to ctx's deadline, or createWait), so that the child's task
// is known and can be cancelled.
func (s *Session) callTask(ctx context.Context, id mcp.RequestId, tc *TaskCall, params callParams) (json.RawMessage, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(createWait)
	}
	cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	created, err := s.send(cctx, id, string(mcp.MethodToolsCall), params)
	if err != nil {
		return nil, err
	}
	return s.followTask(ctx, tc, created)
}

// createWait bounds the wait for a child's answer to a task-augmented call
// whose context has no deadline.
const createWait = time.Minute

// followTask follows the child's task that created (the child's answer to
// a task-augmented tools/call) names to its end and returns the child's
// tasks/result, with the child's related-task _meta left out (mcp-go puts
// in the upstream task's). A child that answered with a plain result is
// taken at its word. When ctx ends first, the child is told to cancel its
// task. The spec has tasks/result wait until the task ends; for a child
// whose does not, tasks/get is polled at its pollInterval.
func (s *Session) followTask(ctx context.Context, tc *TaskCall, created json.RawMessage) (json.RawMessage, error) {
	var ct struct {
		Task *mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(created, &ct); err != nil || ct.Task == nil || ct.Task.TaskId == "" {
		return created, nil
	}
	id := ct.Task.TaskId
	tc.mu.Lock()
	tc.followed = &ChildTask{s: s, id: id}
	tc.mu.Unlock()
	ref := map[string]any{"taskId": id}
	defer func() {
		if ctx.Err() != nil {
			s.cancelTask(id)
		}
	}()
	for {
		res, err := s.send(ctx, s.nextID(), string(mcp.MethodTasksResult), ref)
		if err == nil {
			return withoutRelatedTask(res), nil
		}
		if err = followed(err); isTransport(err) || errors.Is(err, link.ErrMessageTooLarge) {
			return nil, err
		}
		// The child refused tasks/result: its task failed, was cancelled,
		// or (a child that does not wait) is not over yet.
		raw, gerr := s.send(ctx, s.nextID(), string(mcp.MethodTasksGet), ref)
		if gerr != nil {
			return nil, followed(gerr)
		}
		var st mcp.Task
		if jerr := json.Unmarshal(raw, &st); jerr != nil {
			return nil, fmt.Errorf("%w: tasks/get: %v", ErrMalformedResult, jerr)
		}
		switch st.Status {
		case mcp.TaskStatusFailed, mcp.TaskStatusCancelled:
			why := st.StatusMessage
			if why == "" {
				why = err.Error()
			}
			tc.Failed = fmt.Errorf("the server's task %s: %s", st.Status, why)
			return nil, tc.Failed
		case mcp.TaskStatusCompleted:
			return nil, err
		}
		wait := childTaskPoll
		if st.PollInterval != nil && *st.PollInterval > 0 {
			wait = min(time.Duration(*st.PollInterval)*time.Millisecond, time.Minute)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, transport.NewError(context.Cause(ctx))
		case <-timer.C:
		}
	}
}

// delivered is a failure while following a task: the call reached the
// child, so nothing about the failure may read as proof that it never did
// (neverDelivered) and make it safe to send again; it still reads as the
// session's failure.
type delivered struct{ err error }

func (d delivered) Error() string { return d.err.Error() }

// followed hides from neverDelivered what a transport error of the follow
// wraps.
func followed(err error) error {
	if isTransport(err) {
		return transport.NewError(delivered{err})
	}
	return err
}

func isTransport(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) || errors.Is(err, transport.ErrTransportClosed)
}

// cancelTask tells the child to cancel its task id; best effort.
func (s *Session) cancelTask(id string) {
	ctx, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	_, _ = s.send(ctx, s.nextID(), string(mcp.MethodTasksCancel), map[string]any{"taskId": id})
}

// withoutRelatedTask returns a result without the related-task entry of its
// _meta; anything that is not an object with an object _meta as it is.
func withoutRelatedTask(res json.RawMessage) json.RawMessage {
	if !bytes.Contains(res, []byte(mcp.RelatedTaskMetaKey)) {
		return res
	}
	o, ok := jsonwire.Members(res)
	if !ok {
		return res
	}
	for _, f := range o.Members {
		if f.Key != "_meta" {
			continue
		}
		meta, err := jsonwire.WithoutField(res[f.Start:f.End], mcp.RelatedTaskMetaKey)
		if err != nil {
			return res
		}
		if out, err := jsonwire.WithField(res, "_meta", meta); err == nil {
			return out
		}
	}
	return res
}

// TaskRun is the upstream task a call runs as, as the call reaches it.
type TaskRun interface {
	// AskVia is the upstream request a request the child makes during
	// call goes down, waiting up to wait for the client to ask for the
	// task's result.
	AskVia(ctx context.Context, call *InCall, wait time.Duration) *upstream.Attachment
}
