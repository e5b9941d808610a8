// Package tasks owns the upstream tasks of 2025-11-25 clients: mcp-go
// hosts every upstream task, mcpmux runs it. A child tool whose
// execution.taskSupport is optional or required is registered with mcp-go
// under that Execution, so a task-augmented tools/call makes mcp-go create
// a task in its store, answer the client at once and run Handle on its own
// goroutine. That run calls the child
// with the same augmentation, follows the child's task to its end and
// returns the child's tasks/result, relayed as the child sent it; tasks/result
// and tasks/cancel are answered by mcp-go's store, which the run's end and
// OnTaskCancelled keep in step with the child. tasks/get and tasks/list are
// answered by mcp-go's store too, and then, for a task still working there,
// the child is asked for its own task, whose status (working or
// input_required), statusMessage and pollInterval replace mcp-go's
// (withChildStatus). A request the child makes during the run (its
// input_required) goes to the client down the response of the client's
// tasks/result waiting for the task (AskVia). The task ids the client sees
// are mcp-go's, sealed to name their replica when there are several
// (ids.go), and the child's never leave the mux.
//
// What mcp-go v1.2.1 does not do, the mux does here:
//   - it cancels a task handler's context as soon as the task is created
//     (HandleMessage's own cancel), so the run is detached from it and ends
//     instead on tasks/cancel (OnTaskCancelled), on the session's end, or on
//     the call's own time;
//   - it scopes its store by session ID, and a 2026-07-28 request has none:
//     such a request may neither create a task nor read one, and every
//     session sees only the tasks it created;
//   - it sends notifications/tasks/status to every session: those are
//     dropped at the edge, and the mux sends its own to the owner alone.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Task is one task mcp-go hosts for a call of the mux's.
type Task struct {
	id   string          // mcp-go's
	call *child.TaskCall // set under mu once the run starts
	sess *upstream.Session
	// release stops the task's end with sess, once it is forgotten
	// otherwise (its expiry).
	release func()
	// ctx has the caller of the tools/call's context but not its end;
	// cancel ends it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// done is closed once the run has ended; raw is then the child's
	// result, as it sent it, when the task completed with one (tasks/result
	// is answered with it, serveTaskResult), nil otherwise.
	done chan struct{}
	raw  json.RawMessage
	// stored is closed once mcp-go's task store holds the task's end
	// (taskStatus): from then on tasks/get answers it.
	stored     chan struct{}
	storedOnce sync.Once

	mu        sync.Mutex
	ttl       *int64               // as the client asked
	waiting   *upstream.Attachment // the latest tasks/result of the client's; nil before one
	asked     chan struct{}        // closed, and replaced, when a tasks/result comes
	created   string               // the task's createdAt as mcp-go answered it
	createdAt time.Time            // as mcp-go's hook told it
	sealed    string               // the id handed out with replicas (outID); "" before
	expiry    *time.Timer          // forgets the task once mcp-go has; nil without a ttl
	// span is the span of the task's run (its tools/call's), which the
	// spans of the requests for its result link to; invalid before the run.
	span trace.SpanContext
	run  trace.Span // that span, named with the sealed id once it is made
}

// forget stops what the task still holds: its run and its expiry timer.
func (t *Task) forget(cause error) {
	t.cancel(cause)
	t.mu.Lock()
	if t.expiry != nil {
		t.expiry.Stop()
	}
	t.mu.Unlock()
}

// Table holds the mux's upstream tasks.
type Table struct {
	// starting maps the tools/call request (its RequestProtocolInfo, which
	// mcp-go allocates once per request and hands both the task hook and
	// the handler) to the task mcp-go just created for it.
	starting sync.Map // *server.RequestProtocolInfo -> *upTask
	owned    sync.Map // task id -> *upTask

	sessions *upstream.Registry
	ids      IDs    // nil: mcp-go's ids are handed out as they are
	boot     string // this process's, in every sealed id
	log      zerolog.Logger
	pipeline *pipeline.Pipeline // runs each task's call
	srv      *server.MCPServer  // whose store holds the tasks (Serve)
	tracing  *telemetry.Tracing // a span for each task's run, tasks/get and tasks/result; nil: off
	getting  sync.Map           // *mcp.GetTaskRequest -> its span, from mcp-go's before hook to its after hook
}

// New returns the table of the tasks of sessions, whose calls p runs
// within the call timeout or the ttl their client asked for, traced by
// tracing (nil: not). ids, if not nil, seals the task ids handed out
// (several replicas).
func New(sessions *upstream.Registry, p *pipeline.Pipeline, ids IDs, log zerolog.Logger, tracing *telemetry.Tracing) *Table {
	tt := &Table{sessions: sessions, pipeline: p, ids: ids, log: log, tracing: tracing}
	if ids != nil {
		tt.boot = ids.Boot()
	}
	return tt
}

// UseServer hands tt the server whose store holds its tasks, before the
// first task; the server is built with tt's Hooks.
func (tt *Table) UseServer(srv *server.MCPServer) { tt.srv = srv }

// errTaskCancelled ends a task's run when the client cancels the task.
var errTaskCancelled = errors.New("the task was cancelled by the client")

// errSessionGone ends a task's run when its session ends.
var errSessionGone = errors.New("the session that created the task ended")

// Hooks are the hooks that tie mcp-go's tasks to the mux's runs.
func (tt *Table) Hooks() *server.TaskHooks {
	h := &server.TaskHooks{}
	h.AddOnTaskCreated(tt.taskCreated)
	h.AddOnTaskCancelled(func(_ context.Context, tm server.TaskMetrics) {
		if t := tt.lookup(tm.TaskID); t != nil {
			t.cancel(errTaskCancelled)
		}
	})
	h.AddOnTaskStatusChanged(tt.taskStatus)
	return h
}

// taskCreated records a task mcp-go made for a tools/call. It runs under
// mcp-go's task lock, before the handler starts.
func (tt *Table) taskCreated(ctx context.Context, tm server.TaskMetrics) {
	u := tt.sessions.OfMCP(server.ClientSessionFromContext(ctx))
	info := server.RequestProtocolInfoFromContext(ctx)
	if u == nil || info == nil {
		return
	}
	t := &Task{id: tm.TaskID, createdAt: tm.CreatedAt, sess: u, done: make(chan struct{}), stored: make(chan struct{})}
	// The task outlives the request that made it: what it sends goes to
	// the session, never down that request's response.
	t.ctx, t.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	tt.starting.Store(info, t)
	tt.owned.Store(t.id, t)
	// It ends with its session: nobody can ask for it any more.
	var held bool
	t.release, held = u.OnEnd(func() { tt.drop(t, errSessionGone) })
	if !held {
		tt.drop(t, errSessionGone)
	}
}

// drop ends t's run for cause and forgets it.
func (tt *Table) drop(t *Task, cause error) {
	t.forget(cause)
	tt.owned.CompareAndDelete(t.id, t)
}

// begin returns the task mcp-go created for the tools/call whose handler
// runs in ctx, or nil for a call that is not one; it hands each task out
// once.
func (tt *Table) begin(ctx context.Context) *Task {
	info := server.RequestProtocolInfoFromContext(ctx)
	if info == nil {
		return nil
	}
	if v, ok := tt.starting.LoadAndDelete(info); ok {
		return v.(*Task)
	}
	return nil
}

func (tt *Table) lookup(id string) *Task {
	if v, ok := tt.owned.Load(id); ok {
		return v.(*Task)
	}
	return nil
}

// Close ends every task's run and timer, when mcpmux stops.
func (tt *Table) Close() {
	tt.owned.Range(func(_, v any) bool {
		tt.drop(v.(*Task), pipeline.ErrShuttingDown)
		return true
	})
}

// expire forgets t once mcp-go has dropped it (its ttl after creation).
func (tt *Table) expire(t *Task, ttl *int64) {
	if ttl == nil || *ttl <= 0 {
		return
	}
	timer := time.AfterFunc(time.Duration(*ttl)*time.Millisecond+time.Second, func() {
		tt.drop(t, context.DeadlineExceeded)
		t.release()
	})
	t.mu.Lock()
	t.expiry = timer
	t.mu.Unlock()
}

// visibleTo returns the task id if session u, in a request not of
// 2026-07-28 (modern false), may see it: only the session that created it
// may, and no 2026-07-28 request; nil otherwise.
func (tt *Table) visibleTo(u *upstream.Session, modern bool, id string) *Task {
	if t := tt.lookup(id); t != nil && u != nil && !modern && t.sess == u {
		return t
	}
	return nil
}

// guardTask turns id, as the client sent it, into mcp-go's, and makes
// mcp-go answer "task not found" for a task the caller of ctx (a request
// mcp-go handles) may not see, exactly as for one that does not exist.
func (tt *Table) guardTask(ctx context.Context, id *string) {
	u := tt.sessions.OfMCP(server.ClientSessionFromContext(ctx))
	*id = tt.localID(*id)
	if tt.visibleTo(u, server.IsModernRequest(ctx), *id) == nil {
		*id = ""
	}
}

// AddHooks adds the request hooks of tasks to h.
func (tt *Table) AddHooks(h *server.Hooks) {
	h.AddAfterCallTool(func(_ context.Context, _ any, _ *mcp.CallToolRequest, res any) {
		if ct, ok := res.(*mcp.CreateTaskResult); ok {
			if t := tt.lookup(ct.Task.TaskId); t != nil {
				t.mu.Lock()
				// The ttl too: a task cancelled before its run began (it
				// runs on a goroutine of mcp-go's) has its status told
				// with it.
				t.created = ct.Task.CreatedAt
				if t.ttl == nil {
					t.ttl = ct.Task.TTL
				}
				t.mu.Unlock()
				ct.Task.TaskId = tt.outID(t)
				if tt.ids != nil { // without, the run's span has the id already
					t.mu.Lock()
					run := t.run
					t.mu.Unlock()
					if run != nil {
						run.SetAttributes(telemetry.AttrTask.String(ct.Task.TaskId))
					}
				}
			}
		}
	})
	h.AddBeforeGetTask(func(ctx context.Context, _ any, req *mcp.GetTaskRequest) { tt.guardTask(ctx, &req.Params.TaskId) })
	h.AddAfterGetTask(func(ctx context.Context, _ any, _ *mcp.GetTaskRequest, res *mcp.GetTaskResult) {
		if res != nil {
			tt.withChildStatus(ctx, []*mcp.Task{&res.Task})
			res.Task.TaskId = tt.outIDOf(res.Task.TaskId)
		}
	})
	// A tasks/result reaches mcp-go only once its task's run is over and
	// has no result of the child's to answer with (serveTaskResult).
	h.AddBeforeTaskResult(func(ctx context.Context, _ any, req *mcp.TaskResultRequest) {
		tt.guardTask(ctx, &req.Params.TaskId)
	})
	h.AddAfterTaskResult(func(_ context.Context, _ any, _ *mcp.TaskResultRequest, res *mcp.TaskResultResult) {
		if res != nil && res.Meta != nil {
			if rt, ok := res.Meta.AdditionalFields[mcp.RelatedTaskMetaKey].(map[string]any); ok {
				if id, ok := rt["taskId"].(string); ok {
					res.Meta.AdditionalFields[mcp.RelatedTaskMetaKey] = mcp.RelatedTaskMeta(tt.outIDOf(id))
				}
			}
		}
	})
	h.AddBeforeCancelTask(func(ctx context.Context, _ any, req *mcp.CancelTaskRequest) {
		tt.guardTask(ctx, &req.Params.TaskId)
	})
	h.AddAfterCancelTask(func(_ context.Context, _ any, _ *mcp.CancelTaskRequest, res *mcp.CancelTaskResult) {
		if res != nil {
			res.Task.TaskId = tt.outIDOf(res.Task.TaskId)
		}
	})
	tt.traceGets(h)
	h.AddAfterListTasks(func(ctx context.Context, _ any, _ *mcp.ListTasksRequest, res *mcp.ListTasksResult) {
		if res == nil {
			return
		}
		mine := res.Tasks[:0]
		u := tt.sessions.OfMCP(server.ClientSessionFromContext(ctx))
		for _, t := range res.Tasks {
			if tt.visibleTo(u, server.IsModernRequest(ctx), t.TaskId) != nil {
				mine = append(mine, t)
			}
		}
		res.Tasks = mine
		ts := make([]*mcp.Task, len(mine))
		for i := range mine {
			ts[i] = &mine[i]
		}
		tt.withChildStatus(ctx, ts)
		for _, t := range ts {
			t.TaskId = tt.outIDOf(t.TaskId)
		}
	})
}

// childStatusWait bounds the wait for a child's answer to tasks/get asked
// on behalf of a client's tasks/get or tasks/list, and ChildStatusFanout
// how many of those one tasks/list has in flight at once.
const (
	childStatusWait   = 5 * time.Second
	ChildStatusFanout = 8
)

// withChildStatus puts into each of ts that mcp-go still has working what
// the child says of its own task behind it: its status while that is
// working or input_required, its statusMessage and its pollInterval. The
// ids, times and ttl stay mcp-go's. A terminal status of the child's is
// never shown before mcp-go's own: the task keeps mcp-go's "working" until
// the run's tasks/result has brought the child's outcome into mcp-go's
// store, so that a client told "completed" always finds the result. A task
// whose child cannot be asked (no child task yet, the child down or
// restarting, an error, no answer within min(call_timeout, 5s) or the
// request's end) is left as mcp-go has it, and so is every task whose turn
// has not come by then: the children are asked concurrently, at most
// childStatusFanout questions at a time, each on the goroutine that waits
// for its answer.
func (tt *Table) withChildStatus(ctx context.Context, ts []*mcp.Task) {
	ctx, cancel := context.WithTimeout(ctx, min(tt.pipeline.Settings().CallTimeout, childStatusWait))
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, ChildStatusFanout)
	for _, task := range ts {
		if task.Status.IsTerminal() {
			continue
		}
		t := tt.lookup(task.TaskId)
		if t == nil {
			continue
		}
		t.mu.Lock()
		tc := t.call
		t.mu.Unlock()
		ct := tc.Followed()
		if ct == nil {
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			st, err := ct.Status(ctx)
			if err != nil {
				tt.log.Debug().Err(err).Str("task", task.TaskId).Msg("could not ask the server for its task; answered with mcpmux's own status")
				return
			}
			if st.Status != mcp.TaskStatusWorking && st.Status != mcp.TaskStatusInputRequired {
				return
			}
			task.Status, task.StatusMessage = st.Status, st.StatusMessage
			if st.PollInterval != nil {
				task.PollInterval = st.PollInterval
			}
		})
	}
}

// resultAsked notes that the client waits for t's result in the request
// a, whose response stream can carry the child's requests.
func (t *Task) resultAsked(a *upstream.Attachment) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiting = a
	if t.asked != nil {
		close(t.asked)
		t.asked = nil
	}
}

// AskVia returns the upstream request a request the child makes during
// call (ctx is the child's wait for the answer) is sent to the client
// down. For a task's run, where the tools/call that began it has long
// been answered, that is the client's tasks/result waiting for the task,
// as 2025-11-25 has it (input_required tells the client to send one): its
// response stream carries the request. When none is waiting, it is the
// session's own way outside any request (the stdio client; an HTTP
// session's listening GET stream) if it has one; otherwise the request
// waits for a tasks/result, until the child's wait or the run ends or the
// call timeout passes, and then goes the session's way, which may not
// reach the client.
func (tt *Table) AskVia(ctx context.Context, call *child.InCall) *upstream.Attachment {
	if tc := call.Task(); tc != nil && tc.Run != nil {
		return tc.Run.AskVia(ctx, call, tt.pipeline.Settings().CallTimeout)
	}
	return call.Own()
}

// AskVia is askVia for a call run as t, waiting up to wait for a
// tasks/result.
func (t *Task) AskVia(ctx context.Context, call *child.InCall, wait time.Duration) *upstream.Attachment {
	var timeout <-chan time.Time
	for {
		t.mu.Lock()
		w := t.waiting
		if t.asked == nil {
			t.asked = make(chan struct{})
		}
		asked := t.asked
		t.mu.Unlock()
		if w != nil && w.Ctx.Err() == nil {
			return w
		}
		if out := t.sess.SessionOut(); out != nil {
			return &upstream.Attachment{Ctx: call.Own().Ctx, Sess: t.sess, Out: out}
		}
		if timeout == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			timeout = timer.C
		}
		select {
		case <-asked:
		case <-ctx.Done():
			return call.Own()
		case <-call.Own().Ctx.Done():
			return call.Own()
		case <-timeout:
			return call.Own()
		}
	}
}

// taskStatus tells the owner of a task that it ended, as mcp-go would have
// told every session (sendTaskStatusNotification); the edge drops mcp-go's
// own. It runs under mcp-go's task lock: it only queues the notification.
func (tt *Table) taskStatus(_ context.Context, tm server.TaskMetrics) {
	t := tt.lookup(tm.TaskID)
	if t == nil || tm.CompletedAt == nil {
		return
	}
	t.storedOnce.Do(func() { close(t.stored) })
	t.mu.Lock()
	created, ttl := t.created, t.ttl
	t.mu.Unlock()
	if created == "" { // the task ended before its creation was answered
		created = tm.CreatedAt.UTC().Format(time.RFC3339)
	}
	params := map[string]any{
		"taskId":         tt.outID(t),
		"status":         tm.Status,
		"createdAt":      created,
		"lastUpdatedAt":  tm.CompletedAt.UTC().Format(time.RFC3339),
		upstream.OwnMark: true,
	}
	if tm.StatusMessage != "" {
		params["statusMessage"] = tm.StatusMessage
	}
	if ttl != nil {
		params["ttl"] = *ttl
	}
	if err := tt.sessions.Notify(t.sess, mcp.MethodNotificationTasksStatus, params); err != nil {
		tt.log.Debug().Err(err).Str("session", t.sess.ID).Msg("could not send " + mcp.MethodNotificationTasksStatus)
	}
}

// Handle is the handler mcp-go runs, on a goroutine of its own, for
// the task it created for a task-augmented tools/call (the only tools it
// knows of are those that may run as tasks).
func (tt *Table) Handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	t := tt.begin(ctx)
	if t == nil || req.Params.Task == nil {
		// mcp-go runs a tool's handler without a task only for a call
		// mcpmux answers itself, which never reaches it.
		return mcp.NewToolResultError(pipeline.ErrUnknownTool.Error() + ": " + req.Params.Name), nil
	}
	return tt.runTask(t, req)
}

// runTask runs a call as the upstream task t until it ends, and returns
// what mcp-go keeps as the task's outcome: a result (completed), or an
// error (failed) for a call whose child task failed, or that was
// interrupted, timed out or cut off by shutdown. A result of the child's
// is also kept as it came (t.raw), for tasks/result.
func (tt *Table) runTask(t *Task, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer close(t.done)
	defer t.cancel(nil)
	t.mu.Lock()
	t.ttl = req.Params.Task.TTL
	t.mu.Unlock()
	tt.expire(t, req.Params.Task.TTL)
	params := *req.Params.Task
	tc := &child.TaskCall{Params: &params, Run: t}
	t.mu.Lock()
	t.call = tc
	t.mu.Unlock()
	meta, _ := frame.ReadMeta(rawMeta(req.Params.Meta))
	ctx := t.ctx
	if tt.tracing != nil {
		var span trace.Span
		tr := pipeline.SessionRequest(ctx, string(mcp.MethodToolsCall), t.sess)
		tr.Target, tr.Meta = req.Params.Name, meta.Raw
		ctx, span = tt.tracing.Server(ctx, tr)
		// The id the client sees: with replicas, the sealed one, which is
		// made once mcp-go has answered the call (AfterCallTool names the
		// span then); without, the table's own.
		t.mu.Lock()
		if tt.ids == nil {
			span.SetAttributes(telemetry.AttrTask.String(t.id))
		} else if t.sealed != "" {
			span.SetAttributes(telemetry.AttrTask.String(t.sealed))
		}
		t.span, t.run = span.SpanContext(), span
		t.mu.Unlock()
		defer func() { telemetry.EndClient(span, taskErrorType(err, res), err) }()
	}
	up := &child.Call{Identity: upstream.IdentityFrom(ctx), To: &upstream.Attachment{Ctx: ctx, Token: meta.Token, Sess: t.sess}, Task: tc, Meta: meta}
	args := any(req.Params.Arguments)
	if len(req.Params.RawArguments) > 0 {
		args = req.Params.RawArguments
	}
	r := tt.pipeline.Call(ctx, up, req.Params.Name, args)
	switch {
	case r.Outcome == pipeline.OutcomeCancelled:
		return nil, fmt.Errorf("%w: %w", context.Canceled, context.Cause(t.ctx))
	case tc.Failed != nil:
		return nil, tc.Failed
	case r.Outcome == pipeline.OutcomeInterrupted || r.Outcome == pipeline.OutcomeTimeout:
		return nil, errors.New(resultText(r.Tool))
	case r.Raw != nil:
		t.raw = r.Raw
		parsed, perr := mcp.ParseCallToolResult(&r.Raw)
		if perr != nil { // checked when it arrived; cannot happen
			return mcp.NewToolResultError(perr.Error()), nil
		}
		return parsed, nil
	case r.Tool == nil:
		return mcp.NewToolResultError(pipeline.ErrUnknownTool.Error() + ": " + req.Params.Name), nil
	}
	return r.Tool, nil
}

// rawMeta is a request's _meta as mcp-go decoded it, as JSON; nil for none.
func rawMeta(meta *mcp.Meta) []byte {
	if meta == nil {
		return nil
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil
	}
	return b
}

// resultText is the text of one of mcpmux's own results.
func resultText(r *mcp.CallToolResult) string {
	if r != nil && len(r.Content) > 0 {
		if tx, ok := r.Content[0].(mcp.TextContent); ok {
			return tx.Text
		}
	}
	return "the call failed"
}

// ResultOf returns the task a tasks/result f of session u asks for,
// if mcpmux answers it itself: a task of u's own. Another's task, or a
// 2026-07-28 request, goes to mcp-go, which answers it as unknown.
func (tt *Table) ResultOf(u *upstream.Session, f *frame.Frame) *Task {
	if f.Kind != frame.Request || f.Method != string(mcp.MethodTasksResult) || u == nil {
		return nil
	}
	p, err := frame.ReadParams(f.Method, f.Params)
	if err != nil {
		return nil
	}
	meta, err := frame.ReadMeta(p.Meta)
	if err != nil || meta.Protocol.Modern {
		return nil
	}
	var params struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(f.Params, &params) != nil {
		return nil
	}
	return tt.visibleTo(u, false, tt.localID(params.TaskID))
}

// ServeResult answers f, a tasks/result of session u for its task t,
// whose edge is out: the client's request waits for the task's end, its
// stream carrying what the child asks meanwhile (askVia), and is answered
// with the child's result as the child sent it, marked as the task's. A
// task that ended otherwise (it failed, was cancelled, or mcpmux answered
// its call itself), and a request that ends first, are answered by
// mcp-go's store, which holds the task's outcome.
func (tt *Table) ServeResult(ctx context.Context, u *upstream.Session, out upstream.Out, f *frame.Frame, t *Task) (answer []byte) {
	if tt.tracing != nil {
		var span trace.Span
		tr := pipeline.SessionRequest(ctx, f.Method, u)
		tr.ID, tr.Meta = f.ID, metaOf(f)
		ctx, span = tt.tracing.Server(ctx, tr)
		t.mu.Lock()
		run := t.span
		t.mu.Unlock()
		telemetry.LinkToTask(span, run, tt.outID(t))
		defer func() { telemetry.EndServer(span, 0, "", false) }()
	}
	t.resultAsked(&upstream.Attachment{Ctx: ctx, Sess: u, Out: out})
	ran := false
	select {
	case <-t.done:
		ran = true // t.raw is set, if it ever is
	case <-ctx.Done():
	}
	if ran && t.raw != nil {
		// Answered once tasks/get says the task completed too, so that a
		// client that asks it next is not told it is still working.
		select {
		case <-t.stored:
		case <-ctx.Done():
		}
		if ctx.Err() == nil {
			id, _ := json.Marshal(tt.outID(t))
			member := append([]byte(`"`+mcp.RelatedTaskMetaKey+`":{"taskId":`), id...)
			return frame.Result(f.ID, frame.WithMetaMember(t.raw, append(member, '}')))
		}
	}
	resp := tt.srv.HandleMessage(tt.srv.WithContext(ctx, u.MCP()), f.Raw)
	b, err := json.Marshal(resp)
	if err == nil {
		b, err = jsonwire.WithField(b, "id", f.ID) // as the client wrote it
	}
	if err != nil {
		return frame.ErrorAnswer(f.ID, &frame.Error{Code: mcp.INTERNAL_ERROR, Message: err.Error()})
	}
	return append(b, '\n')
}

// metaOf is the _meta of request f as written; nil for none.
func metaOf(f *frame.Frame) []byte {
	p, err := frame.ReadParams(f.Method, f.Params)
	if err != nil {
		return nil
	}
	return p.Meta
}

// taskErrorType is error.type of a task's run that ended with err or res.
func taskErrorType(err error, res *mcp.CallToolResult) string {
	switch {
	case err != nil:
		return "task_failed"
	case res != nil && res.IsError:
		return telemetry.ErrorToolError
	}
	return ""
}
