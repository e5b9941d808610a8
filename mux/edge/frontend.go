package edge

// The front end, shared by the two edges: each message a client sends is
// read once (package frame). A request mcpmux answers itself (owned) is
// made a request of the pipeline's (the Backend) and answered with bytes;
// a client's answer to a request mcpmux sent it goes to the ask that waits
// for it (upstream.Asks); everything else is handed to mcp-go, at one place per
// edge (stdio.go, http.go), which answers the handshake, pings, the log
// level, the task store and whatever mcpmux does not read.

import (
	"bytes"
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// mayTake reports whether mcpmux may answer a request of method itself
// (takes and taskResultOf tell).
func mayTake(method string) bool {
	switch mcp.MCPMethod(method) {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodCompletionComplete,
		mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList,
		mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe, mcp.MethodTasksResult:
		return true
	}
	return false
}

// takes reports whether mcpmux answers f, a request, itself; params are
// its params as read, with its _meta, or the error to answer it with.
// The _meta is read through cache, if not nil. A task-augmented call goes
// to mcp-go's task store if b.TaskCall, asked in ctx (the caller's), says
// so: as hand if that is not nil (call_tool's, as the direct call it
// stands for); any other is mcpmux's, as without a task.
func takes(ctx context.Context, f *frame.Frame, cache *metaCache, b Backend) (params frame.Params, meta frame.Meta, err *frame.Error, ok bool, hand []byte) {
	switch mcp.MCPMethod(f.Method) {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodCompletionComplete,
		mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList,
		mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
	default:
		return params, meta, nil, false, nil
	}
	params, err = frame.ReadParams(f.Method, f.Params)
	if err != nil {
		meta, _ = frame.ReadMeta(params.Meta) // for the transport's checks
		return params, meta, err, true, nil
	}
	if cache != nil {
		meta, err = cache.read(params.Meta)
	} else {
		meta, err = frame.ReadMeta(params.Meta)
	}
	task := false
	if params.Task != nil && !meta.Protocol.Modern {
		hand, task = b.TaskCall(ctx, f, params)
	}
	if owned(f.Method, task, meta.Protocol.Modern) {
		return params, meta, err, true, nil
	}
	return params, meta, nil, false, hand
}

// metaCache keeps the last _meta a session's requests carried, as read: a
// client writes the same _meta on every request (a 2026-07-28 client its
// protocol, capabilities and client), which is then decoded once. Only
// its session's reader uses it.
type metaCache struct {
	raw  []byte
	meta frame.Meta
}

// read is frame.ReadMeta of raw, through the cache.
func (c *metaCache) read(raw []byte) (frame.Meta, *frame.Error) {
	if raw != nil && c.raw != nil && bytes.Equal(raw, c.raw) {
		m := c.meta // kept only without a token, which differs per call
		m.Raw = raw
		return m, nil
	}
	m, err := frame.ReadMeta(raw)
	if err == nil && m.Protocol.Modern && m.Token == nil {
		c.raw, c.meta = bytes.Clone(raw), m
	}
	return m, err
}

// request is the pipeline's request for f, which takes took, on session
// u, its edge out.
func request(f *frame.Frame, p frame.Params, meta frame.Meta, u *upstream.Session, out upstream.Out) *upstream.Request {
	return &upstream.Request{Method: f.Method, ID: bytes.Clone(f.ID), Params: p, Meta: meta, Sess: u, Out: out}
}

// isCancellation reports whether f is the client's notifications/cancelled.
func isCancellation(f *frame.Frame) bool {
	return f.Kind == frame.Notification && f.Method == string(mcp.MethodNotificationCancelled)
}

// owned reports whether mcpmux answers a request of method itself; task
// says whether it is a task-augmented tools/call of a 2025-11-25 client,
// which mcp-go's task store takes.
func owned(method string, task, modern bool) bool {
	switch mcp.MCPMethod(method) {
	case mcp.MethodToolsCall:
		return !task || modern
	case mcp.MethodPromptsGet, mcp.MethodResourcesRead, mcp.MethodCompletionComplete,
		mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesList, mcp.MethodResourcesTemplatesList,
		mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		return true
	}
	return false
}

// Backend answers the requests the front end takes.
type Backend interface {
	// Serve answers r: the answer's JSON-RPC line, and the error it
	// carries, if any. ctx carries r's caller and ends when r does.
	Serve(ctx context.Context, r *upstream.Request) (line []byte, err *frame.Error)
	// TaskResult returns how to answer f, a 2025-11-25 tasks/result of
	// u's for a task whose run has the child's result, down out, or a
	// task request of u's for a task of another replica's; nil when
	// mcp-go answers it.
	TaskResult(u *upstream.Session, f *frame.Frame) func(ctx context.Context, out upstream.Out) []byte
	// Catalog is the catalog published last.
	Catalog() *catalog.Catalog
	// TaskCall reports whether f, a 2025-11-25 task-augmented tools/call
	// with params p by the caller of ctx, runs as a task in mcp-go's store
	// (tasks.Route), as hand if that is not nil, instead of f.
	TaskCall(ctx context.Context, f *frame.Frame, p frame.Params) (hand []byte, ok bool)
}

// Env is what both edges are given: the backend of the requests the front
// end takes, mcp-go's server for the rest, the upstream sessions and the
// logger.
type Env struct {
	Backend  Backend
	MCP      *server.MCPServer
	Sessions *upstream.Registry
	Log      zerolog.Logger
	// Drain is how long the stdio edge waits for the answers still due
	// once its input has ended: a call's timeout and its child's start,
	// as in force when it ends.
	Drain func() time.Duration
	// MaxMessageBytes bounds a stdio client's line.
	MaxMessageBytes int64
	// Tracing reads the trace context of HTTP requests' headers; nil: off.
	Tracing *telemetry.Tracing
}
