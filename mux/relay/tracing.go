package relay

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// traceHandedOff gives each request mcp-go answers a server span, as the
// pipeline gives those mcpmux answers itself: initialize, ping,
// logging/setLevel, server/discover, tasks/list, tasks/cancel, and one
// mcp-go refuses. Not tools/call, tasks/get and tasks/result, whose spans
// the task table makes (linked to the task's run), nor a 2026-07-28
// client's subscriptions/listen, a stream that lasts as long as the
// client listens. The span begins in mcp-go's before hook and ends in its
// success or error hook; the trace context is that of the request's _meta
// or, failing that, its HTTP headers (telemetry.MetaPropagator).
func (m *Relay) traceHandedOff(h *server.Hooks) {
	if m.tracing == nil {
		return
	}
	var open sync.Map // the request mcp-go decoded (a pointer) → its span
	h.AddBeforeAny(func(ctx context.Context, id any, method mcp.MCPMethod, message any) {
		if spanned(method) || !keyable(message) {
			return
		}
		open.Store(message, m.handedOffSpan(ctx, id, method))
	})
	h.AddOnSuccess(func(_ context.Context, _ any, _ mcp.MCPMethod, message any, _ any) {
		if !keyable(message) {
			return
		}
		if v, ok := open.LoadAndDelete(message); ok {
			telemetry.EndServer(v.(trace.Span), 0, "", false)
		}
	})
	h.AddOnError(func(ctx context.Context, id any, method mcp.MCPMethod, message any, err error) {
		if spanned(method) {
			return
		}
		var span trace.Span
		if keyable(message) {
			if v, ok := open.LoadAndDelete(message); ok {
				span = v.(trace.Span)
			}
		}
		if span == nil { // refused before its hooks: unreadable, or of the other era
			span = m.handedOffSpan(ctx, id, method)
		}
		code := mcp.INTERNAL_ERROR
		var coded interface{ ToJSONRPCError() mcp.JSONRPCError }
		if errors.As(err, &coded) {
			code = coded.ToJSONRPCError().Error.Code
		}
		telemetry.EndServer(span, code, err.Error(), false)
	})
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
	r := telemetry.Request{Method: string(method), Transport: telemetry.TransportTCP, Identity: upstream.IdentityFrom(ctx)}
	if u := m.sessions.OfMCP(server.ClientSessionFromContext(ctx)); u != nil {
		r.Session, r.Protocol = u.ID, u.ProtocolVersion()
		if u.Kind == upstream.KindStdio {
			r.Transport = telemetry.TransportPipe
		}
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
