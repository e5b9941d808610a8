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
	tr := telemetry.Request{Method: r.Method, Target: telemetry.Target(r.Method, r.Params.Name, r.Params.URI), ID: r.ID, Protocol: r.Meta.Protocol.Version,
		Identity: upstream.IdentityFrom(ctx), Meta: r.Meta.Raw}
	if r.Sess != nil {
		tr.Session = r.Sess.ID
		if tr.Protocol == "" {
			// A 2025-11-25 request declares no version: its session's is the
			// one initialize negotiated.
			tr.Protocol = r.Sess.ProtocolVersion()
		}
		tr.Transport = telemetry.TransportTCP
		if r.Sess.Kind == upstream.KindStdio {
			tr.Transport = telemetry.TransportPipe
		}
	}
	return tr
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
