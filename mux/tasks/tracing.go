package tasks

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// traceGets adds to h, after the hooks that guard and complete tasks/get,
// those that give each tasks/get of a task mcpmux handed out a server span
// linked to the span of the task's run (mcp-go's store answers it: the
// span begins in its before hook and ends in its after or error hook).
func (tt *Table) traceGets(h *server.Hooks) {
	if tt.tracing == nil {
		return
	}
	h.AddBeforeGetTask(func(ctx context.Context, _ any, req *mcp.GetTaskRequest) {
		u := tt.sessions.OfMCP(server.ClientSessionFromContext(ctx))
		t := tt.lookup(req.Params.TaskId) // "" once guardTask hid it
		if u == nil || t == nil {
			return
		}
		_, span := tt.tracing.Server(ctx, pipeline.SessionRequest(ctx, string(mcp.MethodTasksGet), u))
		t.mu.Lock()
		run := t.span
		t.mu.Unlock()
		telemetry.LinkToTask(span, run, tt.outID(t))
		tt.getting.Store(req, span)
	})
	h.AddAfterGetTask(func(_ context.Context, _ any, req *mcp.GetTaskRequest, _ *mcp.GetTaskResult) {
		if v, ok := tt.getting.LoadAndDelete(req); ok {
			telemetry.EndServer(v.(trace.Span), 0, "", false)
		}
	})
	h.AddOnError(func(_ context.Context, _ any, method mcp.MCPMethod, message any, err error) {
		if req, ok := message.(*mcp.GetTaskRequest); ok && method == mcp.MethodTasksGet {
			if v, ok := tt.getting.LoadAndDelete(req); ok {
				telemetry.EndServer(v.(trace.Span), telemetry.ErrorCode(err), err.Error(), false)
			}
		}
	})
}
