package mux

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// The spans of requests through a Mux whose child is the lab server, a
// real process over stdio offering its tool meta (which answers with the
// _meta it got), to a stdio client, exported to the SDK's in-memory
// exporter.

// clientTrace is the trace context the test's client sends: its own span.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientParent  = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// tracedLab starts a Mux tracing into an in-memory exporter, with the lab
// server as "lab" (its meta tool on), dev allowed everything but
// lab__crash_for_test.
func tracedLab(t *testing.T) (*Mux, *tracetest.InMemoryExporter, *testsupport.SyncBuffer) {
	t.Helper()
	_, lab := testsupport.Binaries(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	log := &testsupport.SyncBuffer{}
	m := runMuxWith(t, map[string]string{"dev": `allow = ["*"]` + "\n" + `deny = ["lab__crash_for_test"]`}, log,
		Options{Tracing: telemetry.New(tp)}, func(policies string) string {
			return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\ncommand = %q\nenv = { LAB_META_TOOL = \"1\" }\n", policies, lab)
		})
	return m, exp, log
}

// spanNamed is the one span named name that exp holds.
func spanNamed(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var names []string
		for _, s := range exp.GetSpans() {
			names = append(names, s.Name)
		}
		t.Fatalf("want one span %q, got %d among %q", name, len(found), names)
	}
	return found[0]
}

// wantAttrs checks that s has each attribute of want, with its value.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value
	}
	for k, v := range want {
		if g, ok := got[attribute.Key(k)]; !ok || g.Emit() != v {
			t.Errorf("span %q: %s = %q (present %v), want %q", s.Name, k, g.Emit(), ok, v)
		}
	}
}

func wantEvent(t *testing.T, s tracetest.SpanStub, name string, attrs map[string]string) {
	t.Helper()
	for _, e := range s.Events {
		if e.Name != name {
			continue
		}
		for k, v := range attrs {
			found := false
			for _, kv := range e.Attributes {
				found = found || (string(kv.Key) == k && kv.Value.Emit() == v)
			}
			if !found {
				t.Errorf("span %q: event %s lacks %s = %q: %v", s.Name, name, k, v, e.Attributes)
			}
		}
		return
	}
	t.Errorf("span %q has no event %s: %v", s.Name, name, s.Events)
}

func TestTraceOfACallAcrossTheHop(t *testing.T) {
	m, exp, log := tracedLab(t)
	s := openSessionAs(t, m, "dev")
	defer s.close()
	meta := `{"traceparent":"` + clientParent + `","x-keep":{"b":[1,2],"a":"<&>"},"progressToken":7}`
	got := s.exchange(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"lab__meta","arguments":{},"_meta":` + meta + `}}`)
	var answer struct {
		Result struct {
			Content []struct{ Text string }
		}
	}
	if len(got) == 0 || json.Unmarshal([]byte(got[len(got)-1]), &answer) != nil || len(answer.Result.Content) != 1 {
		t.Fatalf("answer: %q", got)
	}
	srv := spanNamed(t, exp, "tools/call lab__meta")
	cli := spanNamed(t, exp, "tools/call meta")

	// The server span: the client's span's child, in its trace.
	if srv.SpanKind != trace.SpanKindServer || srv.Parent.TraceID().String() != clientTraceID ||
		srv.Parent.SpanID().String() != clientSpanID || !srv.Parent.IsRemote() {
		t.Errorf("server span: kind %v, parent %v", srv.SpanKind, srv.Parent)
	}
	wantAttrs(t, srv, map[string]string{
		"mcp.method.name": "tools/call", "jsonrpc.request.id": "c1", "network.transport": "pipe", "mcp.protocol.version": "2025-11-25",
		"gen_ai.tool.name": "lab__meta", "gen_ai.operation.name": "execute_tool",
		"mcpmux.identity": "dev", "mcpmux.server.alias": "lab", "mcpmux.policy.decision": "allowed", "mcpmux.outcome": "ok",
	})
	wantEvent(t, srv, telemetry.EventAdmission, nil)
	wantEvent(t, srv, telemetry.EventArguments, map[string]string{"mcpmux.arguments.valid": "true"})

	// The client span: the server span's child, the child's own name.
	if cli.SpanKind != trace.SpanKindClient || cli.Parent.SpanID() != srv.SpanContext.SpanID() {
		t.Errorf("client span: kind %v, parent %v, want the server span %v", cli.SpanKind, cli.Parent.SpanID(), srv.SpanContext.SpanID())
	}
	wantAttrs(t, cli, map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "meta",
		"mcpmux.server.alias": "lab", "network.transport": "pipe"})
	var childID string
	for _, kv := range cli.Attributes {
		if kv.Key == "jsonrpc.request.id" {
			childID = kv.Value.AsString()
		}
	}
	if !strings.HasPrefix(childID, "mcpmux-") {
		t.Errorf("client span's jsonrpc.request.id = %q, want mcpmux's own id", childID)
	}

	// What the child got: the client span's context, the client's other
	// members as they were.
	var childMeta map[string]json.RawMessage
	if err := json.Unmarshal([]byte(answer.Result.Content[0].Text), &childMeta); err != nil {
		t.Fatalf("the child's _meta %q: %v", answer.Result.Content[0].Text, err)
	}
	want := `"00-` + clientTraceID + `-` + cli.SpanContext.SpanID().String() + `-01"`
	if string(childMeta["traceparent"]) != want {
		t.Errorf("the child got traceparent %s, want %s (the client span's)", childMeta["traceparent"], want)
	}
	var keep any
	if err := json.Unmarshal(childMeta["x-keep"], &keep); err != nil || fmt.Sprint(keep) != "map[a:<&> b:[1 2]]" {
		t.Errorf("the child got x-keep %s, want the client's", childMeta["x-keep"])
	}

	// The audit line leads to the trace.
	if line := auditSince(log, 0); !strings.Contains(strings.Join(line, "\n"), `"trace_id":"`+clientTraceID+`"`) ||
		!strings.Contains(strings.Join(line, "\n"), `"span_id":"`+srv.SpanContext.SpanID().String()+`"`) {
		t.Errorf("audit lines without the trace's ids: %q", line)
	}
}

func TestTraceOfRefusedAndFailedCalls(t *testing.T) {
	m, exp, _ := tracedLab(t)
	s := openSessionAs(t, m, "dev")
	defer s.close()
	s.exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lab__crash_for_test","arguments":{}}}`)
	refused := spanNamed(t, exp, "tools/call lab__crash_for_test")
	wantAttrs(t, refused, map[string]string{"jsonrpc.request.id": "1", "error.type": "-32602",
		"mcpmux.policy.decision": "denied", "mcpmux.outcome": "refused", "mcpmux.identity": "dev"})
	if refused.Status.Code.String() != "Error" {
		t.Errorf("refused call's status %v", refused.Status)
	}
	if refused.Parent.IsValid() {
		t.Errorf("a request with no trace context has parent %v", refused.Parent)
	}

	// Arguments the schema refuses: a result with isError.
	s.exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lab__echo","arguments":{"message":5}}}`)
	invalid := spanNamed(t, exp, "tools/call lab__echo")
	wantAttrs(t, invalid, map[string]string{"error.type": "tool_error", "mcpmux.policy.decision": "invalid"})
	wantEvent(t, invalid, telemetry.EventArguments, map[string]string{"mcpmux.arguments.valid": "false"})
	for _, sp := range exp.GetSpans() {
		if sp.SpanKind == trace.SpanKindClient {
			t.Errorf("a refused call reached the child: %q", sp.Name)
		}
	}

	// A list has no target.
	s.exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	wantAttrs(t, spanNamed(t, exp, "tools/list"), map[string]string{"mcp.method.name": "tools/list", "jsonrpc.request.id": "3"})
}

func TestTraceOff(t *testing.T) {
	_, lab := testsupport.Binaries(t)
	m := runMux(t, map[string]string{"dev": `allow = ["*"]`}, nil, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\ncommand = %q\nenv = { LAB_META_TOOL = \"1\" }\n", policies, lab)
	})
	s := openSessionAs(t, m, "dev")
	defer s.close()
	// Off, the client's trace context goes on to the child as the client
	// wrote it, like any other member.
	got := s.exchange(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"lab__meta","arguments":{},"_meta":{"traceparent":"` + clientParent + `"}}}`)
	if len(got) == 0 || !strings.Contains(got[len(got)-1], `\"traceparent\":\"`+clientParent+`\"`) {
		t.Errorf("answer %q, want the client's traceparent as the child got it", got)
	}
}
