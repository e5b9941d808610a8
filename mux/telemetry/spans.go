package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// mcpmux's own attributes.
const (
	AttrIdentity   = attribute.Key("mcpmux.identity")
	AttrServer     = attribute.Key("mcpmux.server.alias")
	AttrDecision   = attribute.Key("mcpmux.policy.decision")
	AttrRule       = attribute.Key("mcpmux.policy.rule")      // the refusing rule's index in its policy
	AttrRuleLine   = attribute.Key("mcpmux.policy.rule_line") // and its line
	AttrOutcome    = attribute.Key("mcpmux.outcome")
	AttrWait       = attribute.Key("mcpmux.wait_seconds")
	AttrPhase      = attribute.Key("mcpmux.child.phase")
	AttrValid      = attribute.Key("mcpmux.arguments.valid")
	AttrRetryWhy   = attribute.Key("mcpmux.retry.reason")
	AttrRetryAlias = attribute.Key("mcpmux.retry.server.alias")
)

// Event names.
const (
	EventAdmission = "mcpmux.admission"       // a slot of the child's max_in_flight taken
	EventArguments = "mcpmux.arguments.check" // the arguments checked against the tool's schema
	EventChildWait = "mcpmux.child.wait"      // waited for the child to be ready (a start or restart)
	EventRetry     = "mcpmux.retry"           // the call sent again on the child's next session
)

// ErrorToolError is error.type of a call whose result has isError.
const ErrorToolError = "tool_error"

// Transports, as network.transport names them.
const (
	TransportPipe = "pipe" // stdio
	TransportTCP  = "tcp"  // HTTP
)

// propagator reads and writes W3C trace context and baggage.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Request is an upstream request as its server span shows it.
type Request struct {
	Method    string
	Target    string // the tool's or prompt's name, or the URI; "" for none
	ID        []byte // the JSON-RPC id as written
	Session   string // the HTTP session's id; "" for none
	Protocol  string // the protocol version, when known
	Transport string // TransportPipe or TransportTCP
	Identity  string
	Meta      []byte // params._meta as written
}

// ExtractHTTP is ctx with the trace context of an HTTP request's
// traceparent, tracestate and baggage headers; ctx itself when tracing is
// off.
func (t *Tracing) ExtractHTTP(ctx context.Context, h http.Header) context.Context {
	if t == nil {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Server starts r's server span, the child of the trace context of r's
// _meta or, failing that, of ctx's (ExtractHTTP); nil when tracing is
// off. The caller ends it with EndServer.
func (t *Tracing) Server(ctx context.Context, r Request) (context.Context, trace.Span) {
	if t == nil {
		return ctx, nil
	}
	if r.Meta != nil {
		ctx = propagator.Extract(ctx, metaCarrier{raw: r.Meta})
	}
	ctx, span := t.tracer.Start(ctx, spanName(r.Method, r.Target), serverKind)
	if !span.IsRecording() {
		return ctx, span
	}
	// Set on the span rather than passed to Start: WithAttributes's copies
	// of them, into the option and the start config, would be two more
	// allocations per span, for samplers that read none of them.
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, semconv.McpMethodNameKey.String(r.Method), semconv.NetworkTransportKey.String(r.Transport),
		AttrIdentity.String(r.Identity))
	if r.ID != nil {
		attrs = append(attrs, semconv.JSONRPCRequestID(idString(r.ID)))
	}
	if r.Session != "" {
		attrs = append(attrs, semconv.McpSessionID(r.Session))
	}
	if r.Protocol != "" {
		attrs = append(attrs, semconv.McpProtocolVersion(r.Protocol))
	}
	span.SetAttributes(appendTarget(attrs, r.Method, r.Target)...)
	return ctx, span
}

// The options of every span and event of a kind, built once.
var (
	serverKind = trace.WithSpanKind(trace.SpanKindServer)
	clientKind = trace.WithSpanKind(trace.SpanKindClient)
	argsValid  = trace.WithAttributes(AttrValid.Bool(true))
	argsBad    = trace.WithAttributes(AttrValid.Bool(false))
)

// EndServer ends span (nil: none), that of a request answered with the
// JSON-RPC error code (0: a result), or with a result that has isError.
func EndServer(span trace.Span, code int, message string, isError bool) {
	if span == nil {
		return
	}
	if isError {
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorToolError))
	}
	if code != 0 {
		c := strconv.Itoa(code)
		span.SetAttributes(semconv.ErrorTypeKey.String(c), semconv.RPCResponseStatusCode(c))
		span.SetStatus(codes.Error, message)
	}
	span.End()
}

// Client starts the client span of a request to the child alias over
// transport, the child of ctx's span; nil when ctx's span is not
// recording. The caller ends it with EndClient.
func (t *Tracing) Client(ctx context.Context, method, target, alias, transport string) (context.Context, trace.Span) {
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	ctx, span := t.tracer.Start(ctx, spanName(method, target), clientKind)
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := make([]attribute.KeyValue, 0, 5)
	attrs = append(attrs, semconv.McpMethodNameKey.String(method), semconv.NetworkTransportKey.String(transport), AttrServer.String(alias))
	span.SetAttributes(appendTarget(attrs, method, target)...)
	return ctx, span
}

// EndClient ends span (nil: none), that of a request that ended as
// errorType says ("" for success, ErrorToolError, a JSON-RPC code, or
// another low-cardinality name), with err its error if any.
func EndClient(span trace.Span, errorType string, err error) {
	if span == nil {
		return
	}
	if errorType != "" {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// Decision is how the pipeline judged a request, as its audit line says.
type Decision struct {
	Server, Decision, Outcome string
	Rule, RuleLine            int  // the refusing rule's, when HasRule
	HasRule                   bool // a rule refused
}

// Decided records d on ctx's span.
func Decided(ctx context.Context, d Decision) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, AttrDecision.String(d.Decision), AttrOutcome.String(d.Outcome))
	if d.Server != "" {
		attrs = append(attrs, AttrServer.String(d.Server))
	}
	if d.HasRule {
		attrs = append(attrs, AttrRule.Int(d.Rule), AttrRuleLine.Int(d.RuleLine))
	}
	span.SetAttributes(attrs...)
}

// AdmissionWaited records on ctx's span that the call waited that long
// for a slot of its child's max_in_flight.
func AdmissionWaited(ctx context.Context, waited time.Duration) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventAdmission, trace.WithAttributes(AttrWait.Float64(waited.Seconds())))
	}
}

// ArgumentsChecked records on ctx's span the check of a call's arguments.
func ArgumentsChecked(ctx context.Context, valid bool) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		opt := argsBad
		if valid {
			opt = argsValid
		}
		span.AddEvent(EventArguments, opt)
	}
}

// ChildWait is a request's wait for its child to be ready; the zero
// value is none yet.
type ChildWait struct {
	since time.Time
	phase string // the child's when the wait began: starting, restarting
}

// Begin notes that the request waits, the child being in phase; a wait
// begun already goes on. A wait that began while the child was still
// "ready" (its session lost, the restart not yet under way) takes the
// phase that comes next.
func (w *ChildWait) Begin(phase string) {
	if w.since.IsZero() {
		w.since = time.Now()
	}
	if w.phase == "" || w.phase == "ready" {
		w.phase = phase
	}
}

// Done records on ctx's span the wait for child alias, if there was one.
func (w *ChildWait) Done(ctx context.Context, alias string) {
	if w.since.IsZero() {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventChildWait, trace.WithAttributes(AttrServer.String(alias), AttrPhase.String(w.phase),
			AttrWait.Float64(time.Since(w.since).Seconds())))
	}
}

// Retried records on ctx's span that the call is sent again, to alias's
// next session, the first having gone away for why.
func Retried(ctx context.Context, alias, why string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventRetry, trace.WithAttributes(AttrRetryAlias.String(alias), AttrRetryWhy.String(why)))
	}
}

// Log is e with the trace_id and span_id of ctx's span, when it has one
// and e is not disabled (nil).
func Log(ctx context.Context, e *zerolog.Event) *zerolog.Event {
	if e == nil {
		return e
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return e
	}
	// Hex writes the ids' hex into the line, as their String would, without
	// making those strings.
	tid, sid := sc.TraceID(), sc.SpanID()
	return e.Hex("trace_id", tid[:]).Hex("span_id", sid[:])
}

// Headers are the HTTP headers that carry ctx's trace context to a
// remote child; nil when ctx has none.
func Headers(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	h := propagation.MapCarrier{}
	propagator.Inject(ctx, h)
	return h
}

// spanName is a span's name by the MCP conventions: the method, and its
// target when it has one.
func spanName(method, target string) string {
	if target == "" {
		return method
	}
	return spanNames.name(method, target)
}

// spanNames are the names of spans with a target made so far, up to
// maxSpanNames of them: a request's two spans take their names from here
// rather than building them again (two allocations a call).
var spanNames = names{m: map[[2]string]string{}}

const maxSpanNames = 4096

type names struct {
	mu sync.RWMutex
	m  map[[2]string]string // by method and target
}

func (n *names) name(method, target string) string {
	k := [2]string{method, target}
	n.mu.RLock()
	name, ok := n.m[k]
	n.mu.RUnlock()
	if ok {
		return name
	}
	name = method + " " + target
	n.mu.Lock()
	if len(n.m) < maxSpanNames {
		n.m[k] = name
	}
	n.mu.Unlock()
	return name
}

// appendTarget is attrs and the attributes naming a request's target.
func appendTarget(attrs []attribute.KeyValue, method, target string) []attribute.KeyValue {
	if target == "" {
		return attrs
	}
	switch method {
	case "tools/call":
		return append(attrs, semconv.GenAIToolName(target), semconv.GenAIOperationNameExecuteTool)
	case "prompts/get":
		return append(attrs, semconv.GenAIPromptName(target))
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return append(attrs, semconv.McpResourceURI(target))
	}
	return attrs
}

// idString is a JSON-RPC id as jsonrpc.request.id gives it: a string's
// value, a number's digits.
func idString(id []byte) string {
	return idText(string(id))
}

// idText is idString of an id held in a string. A string without escapes,
// which mcpmux's own ids and most clients' are, is sliced, not decoded.
func idText(id string) string {
	if len(id) < 2 || id[0] != '"' {
		return id
	}
	if inner := id[1 : len(id)-1]; id[len(id)-1] == '"' && !strings.ContainsAny(inner, "\\\"") {
		return inner
	}
	var s string
	if json.Unmarshal([]byte(id), &s) == nil {
		return s
	}
	return id
}

// Target is what a request of method names: name (a tool's, a prompt's) or
// uri; "" for none.
func Target(method, name, uri string) string {
	switch method {
	case "tools/call", "prompts/get":
		return name
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return uri
	}
	return ""
}

// ClientTarget is what the params of a request to a child name: the
// prompt or the URI; "" for none.
func ClientTarget(params map[string]any) string {
	for _, k := range [...]string{"name", "uri"} {
		if s, ok := params[k].(string); ok {
			return s
		}
	}
	return ""
}

// OperationErrorType is error.type of a request answered with the
// JSON-RPC error code (0 for a result), or with a result that has
// isError: a code the protocol reserves, or "_OTHER" for another, so that
// a metric's series stay few.
func OperationErrorType(code int, isError bool) string {
	switch {
	case isError:
		return ErrorToolError
	case code == 0:
		return ""
	case code >= -32768 && code <= -32000:
		return strconv.Itoa(code)
	}
	return "_OTHER"
}
