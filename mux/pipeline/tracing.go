package pipeline

import (
	"context"
	"errors"
	"strconv"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The pipeline's hooks into mux/telemetry: what a request's spans and
// operation metrics are told of it.

// traceRequest is r as its server span shows it.
func traceRequest(ctx context.Context, r *upstream.Request) telemetry.Request {
	tr := SessionRequest(ctx, r.Method, r.Sess)
	tr.Target, tr.ID, tr.Meta = telemetry.Target(r.Method, r.Params.Name, r.Params.URI), r.ID, r.Meta.Raw
	// A 2025-11-25 request declares no version: its session's is the one
	// initialize negotiated.
	if v := r.Meta.Protocol.Version; v != "" {
		tr.Protocol = v
	}
	return tr
}

// SessionRequest is a request of method from session u (nil: none known)
// as its server span shows it, but for what only the request says (its
// target, id and _meta). Here rather than in telemetry or upstream, which
// know nothing of each other, so that the task table's and the relay's
// spans of the requests the pipeline does not answer name their session
// as its own spans do.
func SessionRequest(ctx context.Context, method string, u *upstream.Session) telemetry.Request {
	r := telemetry.Request{Method: method, Identity: upstream.IdentityFrom(ctx)}
	if u != nil {
		r.Session, r.Protocol, r.Transport = u.ID, u.ProtocolVersion(), telemetry.TransportTCP
		if u.Kind == upstream.KindStdio {
			r.Transport = telemetry.TransportPipe
		}
	}
	return r
}

// childTransport is network.transport of the requests to c.
func childTransport(c *child.Server) string {
	if c.Config().URL != "" {
		return telemetry.TransportTCP
	}
	return telemetry.TransportPipe
}

// clientErrorType is error.type of a request to a child that ended with
// err, its result having isError: the child's JSON-RPC error code, "tool_error",
// or what kind of failure it was; "" for none.
func clientErrorType(err error, isError bool) string {
	if err == nil {
		if isError {
			return telemetry.ErrorToolError
		}
		return ""
	}
	if ce, ok := errors.AsType[*child.RPCError](err); ok {
		return strconv.Itoa(ce.Details.Code)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	if errors.Is(err, context.Canceled) {
		return "cancelled"
	}
	return "_OTHER"
}
