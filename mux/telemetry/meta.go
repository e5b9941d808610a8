package telemetry

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"

	"go.opentelemetry.io/otel/baggage"
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
//
// It writes what the W3C propagators would (propagator.Inject), straight
// into the bytes: this runs on every request to a child.
func MetaFor(ctx context.Context, meta []byte, id string) []byte {
	span := trace.SpanFromContext(ctx)
	sc := span.SpanContext()
	if !sc.IsValid() {
		return meta
	}
	if span.IsRecording() {
		span.SetAttributes(semconv.JSONRPCRequestID(idText(id)))
	}
	bag := baggage.FromContext(ctx)
	out := make([]byte, 0, len(meta)+96)
	out = appendOthers(out, meta)
	// In the order of their names (baggage, traceparent, tracestate), as
	// they always were (a baggage's own members come in no fixed order).
	if bag.Len() > 0 {
		out = append(appendMember(out, "baggage", bag.String()), ',')
	}
	out = appendTraceparent(append(out, `"traceparent":"`...), sc)
	out = append(out, '"')
	if ts := sc.TraceState(); ts.Len() > 0 {
		out = appendMember(append(out, ','), "tracestate", ts.String())
	}
	return append(out, '}')
}

// appendOthers appends to out "{" and the members of meta (an object, or
// nil) but those of the trace context, and a comma after them if there
// are any. When meta holds none of those names it is copied as written.
func appendOthers(out, meta []byte) []byte {
	body := bytes.TrimSpace(meta)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return append(out, '{')
	}
	if !bytes.Contains(body, []byte("traceparent")) && !bytes.Contains(body, []byte("tracestate")) &&
		!bytes.Contains(body, []byte("baggage")) {
		inner := bytes.TrimSpace(body[1 : len(body)-1])
		out = append(out, body[:len(body)-1]...)
		if len(inner) > 0 {
			out = append(out, ',')
		}
		return out
	}
	out = append(out, '{')
	if obj, ok := jsonwire.Members(meta); ok {
		for _, m := range obj.Members {
			if !metaKeys[m.Key] {
				out = append(append(out, meta[m.KeyStart:m.End]...), ',')
			}
		}
	}
	return out
}

// appendMember appends to out the member "key":value.
func appendMember(out []byte, key, value string) []byte {
	out = append(append(append(out, '"'), key...), `":`...)
	return appendJSONString(out, value)
}

// appendTraceparent appends sc as a W3C traceparent: version 00, the
// trace and span ids, and of the flags those the specification defines.
func appendTraceparent(out []byte, sc trace.SpanContext) []byte {
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom)
	out = append(out, "00-"...)
	out = hex.AppendEncode(out, tid[:])
	out = append(out, '-')
	out = hex.AppendEncode(out, sid[:])
	out = append(out, '-')
	return hex.AppendEncode(out, []byte{byte(flags)})
}

// appendJSONString appends s as encoding/json writes it: a string of
// printable ASCII with nothing to escape as it is, anything else through
// json.Marshal.
func appendJSONString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(out, b...)
		}
	}
	return append(append(append(out, '"'), s...), '"')
}
