package telemetry

import (
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
)

// LogHook adds to a log line written with a context (zerolog's Event.Ctx,
// or a logger made with Context.Ctx) the trace_id and span_id of that
// context's span, when it has one: a line written while a request is
// handled leads to its trace. mux.New installs it on mcpmux's logger when
// tracing is on; off, no line pays for it.
type LogHook struct{}

// Run implements zerolog.Hook.
func (LogHook) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	if sc := trace.SpanContextFromContext(e.GetCtx()); sc.IsValid() {
		e.Str("trace_id", sc.TraceID().String()).Str("span_id", sc.SpanID().String())
	}
}
