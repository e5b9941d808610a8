package relay

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// traceHandedOff gives each request mcp-go answers a server span, as the
// pipeline gives those mcpmux answers itself: initialize, ping,
// logging/setLevel, server/discover, tasks/list, tasks/cancel, and one
// mcp-go refuses once it has read its method (of the other era, or
// unreadable). Not tools/call, tasks/get and tasks/result, whose spans the
// task table makes (linked to the task's run), nor a 2026-07-28 client's
// subscriptions/listen, a stream that lasts as long as the client
// listens, nor a method mcp-go does not know, which it answers before any
// hook. The span begins in mcp-go's before hook and ends in the method's
// own after hook, registered after mcpmux's others (mcp-go runs its
// success hook before them, and they do the waiting: the handshake's for
// the children's first start, setLevel's for the children, tasks/list's
// for their status), or in the error hook; one whose request ended
// without either (a panic mcp-go recovered) ends with the request. The
// trace context is that of the request's _meta or, failing that, its HTTP
// headers (telemetry.MetaPropagator). The span is not in the context of
// what those hooks do: mcp-go's hooks cannot hand a context on.
func (m *Relay) traceHandedOff(h *server.Hooks) {
	if m.tracing == nil {
		return
	}
	var open sync.Map // the request mcp-go decoded (a pointer) → its span
	end := func(message any, code int, why string) {
		if v, ok := open.LoadAndDelete(message); ok {
			telemetry.EndServer(v.(trace.Span), code, why, false)
		}
	}
	h.AddBeforeAny(func(ctx context.Context, id any, method mcp.MCPMethod, message any) {
		if spanned(method) || !keyable(message) {
			return
		}
		open.Store(message, m.handedOffSpan(ctx, id, method))
		// mcp-go cancels ctx once it has answered the request.
		context.AfterFunc(ctx, func() { end(message, mcp.INTERNAL_ERROR, "the request ended without an answer") })
	})
	h.AddOnSuccess(func(_ context.Context, _ any, method mcp.MCPMethod, message any, _ any) {
		if !endsAfter(method) && keyable(message) {
			end(message, 0, "")
		}
	})
	h.AddAfterInitialize(func(_ context.Context, _ any, req *mcp.InitializeRequest, _ *mcp.InitializeResult) { end(req, 0, "") })
	h.AddAfterDiscover(func(_ context.Context, _ any, req *mcp.DiscoverRequest, _ *mcp.DiscoverResult) { end(req, 0, "") })
	h.AddAfterPing(func(_ context.Context, _ any, req *mcp.PingRequest, _ *mcp.EmptyResult) { end(req, 0, "") })
	h.AddAfterSetLevel(func(_ context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) { end(req, 0, "") })
	h.AddAfterListTasks(func(_ context.Context, _ any, req *mcp.ListTasksRequest, _ *mcp.ListTasksResult) { end(req, 0, "") })
	h.AddAfterCancelTask(func(_ context.Context, _ any, req *mcp.CancelTaskRequest, _ *mcp.CancelTaskResult) { end(req, 0, "") })
	h.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, message any, err error) {
		if spanned(method) {
			return
		}
		if keyable(message) {
			if _, ok := open.Load(message); ok {
				end(message, telemetry.ErrorCode(err), err.Error())
				return
			}
		}
		// Refused before its hooks: unreadable, or of the other era.
		telemetry.EndServer(m.handedOffSpan(ctx, id, method), telemetry.ErrorCode(err), err.Error(), false)
	})
}

// endsAfter reports whether a request of method has its span ended in the
// method's own after hook rather than the success hook.
func endsAfter(method mcp.MCPMethod) bool {
	switch method {
	case mcp.MethodInitialize, mcp.MethodServerDiscover, mcp.MethodPing, mcp.MethodSetLogLevel,
		mcp.MethodTasksList, mcp.MethodTasksCancel:
		return true
	}
	return false
}

// spanned reports whether requests of method have spans of their own.
func spanned(method mcp.MCPMethod) bool {
	switch method {
	case mcp.MethodToolsCall, mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodSubscriptionsListen:
		return true
	}
	return false
}

// keyable reports whether message can key a map: mcp-go hands its
// hooks a pointer to the request it decoded.
func keyable(message any) bool {
	return message != nil && reflect.TypeOf(message).Kind() == reflect.Pointer
}

// handedOffSpan starts the server span of a request of method under id
// that mcp-go answers.
func (m *Relay) handedOffSpan(ctx context.Context, id any, method mcp.MCPMethod) trace.Span {
	r := pipeline.SessionRequest(ctx, string(method), m.sessions.OfMCP(server.ClientSessionFromContext(ctx)))
	if r.Transport == "" {
		// No session yet: an HTTP client's initialize (the stdio
		// client's session is open before its first request).
		r.Transport = telemetry.TransportTCP
	}
	if b, err := json.Marshal(id); err == nil && !standIn(b) {
		r.ID = b
	}
	_, span := m.tracing.Server(ctx, r)
	return span
}

// standIn reports whether id (JSON) is one the edge handed mcp-go in place
// of the client's (reqid.StandIn: a negative integer), which the span
// would misname.
func standIn(id []byte) bool { return len(id) > 1 && id[0] == '-' }
