package telemetry

import (
	"context"
	"encoding/json"
	"sort"

	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// metaCarrier reads the trace context of a request's params._meta (the
// 2026-07-28 revision reserves traceparent, tracestate and baggage there):
// the string members of the object raw.
type metaCarrier struct{ raw []byte }

func (c metaCarrier) Get(key string) string {
	obj, ok := jsonwire.Members(c.raw)
	if !ok {
		return ""
	}
	m := obj.Last(key)
	if m == nil {
		return ""
	}
	var s string
	if json.Unmarshal(c.raw[m.Start:m.End], &s) != nil {
		return ""
	}
	return s
}

func (c metaCarrier) Set(string, string) {} // only read

func (c metaCarrier) Keys() []string {
	obj, _ := jsonwire.Members(c.raw)
	keys := make([]string, len(obj.Members))
	for i, m := range obj.Members {
		keys[i] = m.Key
	}
	return keys
}

// metaKeys are the _meta members the trace context takes.
var metaKeys = map[string]bool{"traceparent": true, "tracestate": true, "baggage": true}

// MetaFor is meta, the _meta of a request to a child (an object, nil for
// none), carrying ctx's trace context in its traceparent, tracestate and
// baggage members, in place of those the client sent; every other member
// is kept as written. id is the child request's id, as JSON, which goes
// on ctx's span. It is meta itself when ctx carries no trace.
func MetaFor(ctx context.Context, meta []byte, id string) []byte {
	span := trace.SpanFromContext(ctx)
	if !span.SpanContext().IsValid() {
		return meta
	}
	if span.IsRecording() {
		span.SetAttributes(semconv.JSONRPCRequestID(idString([]byte(id))))
	}
	set := propagation.MapCarrier{}
	propagator.Inject(ctx, set)
	out := make([]byte, 0, len(meta)+128)
	out = append(out, '{')
	if obj, ok := jsonwire.Members(meta); ok {
		for _, m := range obj.Members {
			if metaKeys[m.Key] {
				continue
			}
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, meta[m.KeyStart:m.End]...)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys) // baggage, traceparent, tracestate: the same bytes every time
	for _, k := range keys {
		if len(out) > 1 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		vb, _ := json.Marshal(set[k])
		out = append(append(append(out, kb...), ':'), vb...)
	}
	return append(out, '}')
}
