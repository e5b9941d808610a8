package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The spans of what a request starts beyond its own answer: the requests
// a child makes of the client during a call (sampling, elicitation, roots),
// relayed to the client directly or handed out in a 2026-07-28 round, and
// the client's retries that carry a round on.

// AttrLinkKind says what a span's link leads to: LinkRound, the request
// that started the round the span's request carries on.
const (
	AttrLinkKind = attribute.Key("mcpmux.link.kind")
	LinkRound    = "round"
	LinkTask     = "task"
	AttrTask     = attribute.Key("mcpmux.task.id") // the task mcpmux handed out
)

// LinkToTask links span (nil: none), a request for a task's result, to
// the span of the task's run, task, and names the task on it.
func LinkToTask(span trace.Span, task trace.SpanContext, id string) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrTask.String(id))
	if task.IsValid() {
		span.AddLink(trace.Link{SpanContext: task, Attributes: []attribute.KeyValue{AttrLinkKind.String(LinkTask)}})
	}
}

// LinkToRound links ctx's span, a retry of a round (a request with a
// requestState), to the span of origin's request, the one that started
// the round. It does nothing when either has no span.
func LinkToRound(ctx, origin context.Context) {
	span := trace.SpanFromContext(ctx)
	sc := trace.SpanContextFromContext(origin)
	if !span.IsRecording() || !sc.IsValid() {
		return
	}
	span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLinkKind.String(LinkRound)}})
}

// Relayed starts the span of a request of method that child alias made of
// the client during the call whose context is call: a client span (mcpmux
// asks the client) in the call's trace, the child of the call's server
// span and linked to it, from the call's own tracer provider; nil when
// the call's span was not sampled. A round's call span may have ended
// (its first request answered with input_required) before the child asks.
// The caller ends it with EndClient.
func Relayed(call context.Context, method, alias string) trace.Span {
	origin := trace.SpanFromContext(call)
	if !origin.SpanContext().IsSampled() {
		return nil
	}
	_, span := origin.TracerProvider().Tracer(instrumentation).Start(call, method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: origin.SpanContext(), Attributes: []attribute.KeyValue{AttrLinkKind.String(LinkRound)}}),
		trace.WithAttributes(semconv.McpMethodNameKey.String(method), AttrServer.String(alias)))
	return span
}
