package mux

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/replicas"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// The spans of what a call starts beyond its answer: the child's requests
// of the client relayed during it, and a 2026-07-28 round's retries.

// tracedTraffic is the traffic lab tracing into an in-memory exporter.
func tracedTraffic(t *testing.T) (*trafficLab, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return startTrafficLab(t, trafficOptions{tracing: telemetry.New(tp)}), exp
}

// spansNamed are the spans named name that exp holds.
func spansNamed(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	return found
}

// linkedTo reports whether s has a round link to the span sc.
func linkedTo(s tracetest.SpanStub, sc trace.SpanContext) bool {
	for _, l := range s.Links {
		for _, kv := range l.Attributes {
			if l.SpanContext.SpanID() == sc.SpanID() && kv.Key == telemetry.AttrLinkKind && kv.Value.AsString() == telemetry.LinkRound {
				return true
			}
		}
	}
	return false
}

// wantRelayed checks that exp holds one span of method, the child of the
// call's span srv and linked to it, with its attributes.
func wantRelayed(t *testing.T, exp *tracetest.InMemoryExporter, method, alias string, srv tracetest.SpanStub) {
	t.Helper()
	rel := spanNamed(t, exp, method)
	if rel.SpanKind != trace.SpanKindClient || rel.Parent.SpanID() != srv.SpanContext.SpanID() || !linkedTo(rel, srv.SpanContext) {
		t.Errorf("%s: kind %v, parent %v, links %v; want a client span, the child of and linked to the call's %v",
			method, rel.SpanKind, rel.Parent.SpanID(), rel.Links, srv.SpanContext.SpanID())
	}
	wantAttrs(t, rel, map[string]string{"mcp.method.name": method, "mcpmux.server.alias": alias})
}

// TestTraceOfRelayedRequests: a 2025-11-25 call whose child asks the client
// for sampling, elicitation and roots has a span for each, in the call's
// trace.
func TestTraceOfRelayedRequests(t *testing.T) {
	l, exp := tracedTraffic(t)
	u := stdioUpstream(t, l.m, "alice", withAnswers("alice")...)
	for what, method := range map[string]string{"sampling": "sampling/createMessage", "elicitation": "elicitation/create", "roots": "roots/list"} {
		exp.Reset()
		callChild(t, u, "ht", "ask", map[string]any{"what": what}, nil)
		wantRelayed(t, exp, method, "ht", spanNamed(t, exp, "tools/call ht__ask"))
	}
}

// TestTraceOfARound: a 2026-07-28 call run as rounds has a span for each
// request of the child's it hands out, in the first request's trace, and
// each retry's server span is linked to the first request's.
func TestTraceOfARound(t *testing.T) {
	l, exp := tracedTraffic(t)
	u := modernStdio(t, l.m, "alice", withAnswers("alice")...)
	callChild(t, u, "ht", "asks", map[string]any{"tag": "traced", "rounds": "sampling/elicitation+roots"}, nil)
	// The first request's span, and its retries': a retry whose round
	// hands out nothing new (its answer not ready yet) is one more.
	var first tracetest.SpanStub
	var retries []tracetest.SpanStub
	for _, s := range spansNamed(exp, "tools/call ht__asks") {
		if len(s.Links) == 0 {
			first = s
		} else {
			retries = append(retries, s)
		}
	}
	if !first.SpanContext.IsValid() || len(retries) < 2 {
		t.Fatalf("server spans of the call: the first request's %v, %d retries'; want one and at least two", first.SpanContext.SpanID(), len(retries))
	}
	for _, retry := range retries {
		if !linkedTo(retry, first.SpanContext) || len(retry.Links) != 1 {
			t.Errorf("a retry's span has links %v, want one, to the first request's %v", retry.Links, first.SpanContext.SpanID())
		}
	}
	for _, method := range []string{"sampling/createMessage", "elicitation/create", "roots/list"} {
		wantRelayed(t, exp, method, "ht", first)
	}
	wantAttrs(t, first, map[string]string{"mcp.protocol.version": "2026-07-28"})
}

// tracedTask runs a 2025-11-25 task-augmented call of lab__slow over HTTP,
// as reader, with clientParent in its _meta, to its end, and asks for its
// result, the Mux tracing into exp; replica, if not nil, seals the ids
// handed out. task and session are the ids the client was given.
func tracedTask(t *testing.T, replica *replicas.Node) (exp *tracetest.InMemoryExporter, task, session string) {
	t.Helper()
	exp = tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tc := newTaskChild()
	spec := tc.spec()
	spec.tracing, spec.replica = telemetry.New(tp), replica
	m := startLab(t, spec)
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })
	c := connectTasks(t, url)
	raw := testsupport.MustRPC(t, c.Client, "tools/call", map[string]any{"name": "lab__slow", "arguments": map[string]any{},
		"task": map[string]any{"ttl": 60000}, "_meta": map[string]any{"traceparent": clientParent}})
	var ct struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(raw, &ct); err != nil || ct.Task.TaskId == "" {
		t.Fatalf("tools/call as a task: %s (%v)", raw, err)
	}
	// The run has begun once the child has its task: tasks/get from then on
	// links to its span.
	testsupport.WaitFor(t, "the child's task", func() bool { return len(tc.childTasks()) == 1 })
	close(tc.release)
	waitStatus(t, c, ct.Task.TaskId, mcp.TaskStatusCompleted)
	testsupport.MustRPC(t, c.Client, "tasks/result", taskRef(ct.Task.TaskId))
	return exp, ct.Task.TaskId, c.Client.GetSessionId()
}

// TestTraceOfATask: a 2025-11-25 task-augmented call's run has a server
// span of its own, the child of the client's trace context in the call's
// _meta, naming the task, with the client span of the call to the child
// under it; tasks/get and tasks/result have server spans linked to the
// run's.
func TestTraceOfATask(t *testing.T) {
	exp, task, _ := tracedTask(t, nil)
	run := spanNamed(t, exp, "tools/call lab__slow")
	if run.SpanKind != trace.SpanKindServer || run.Parent.SpanID().String() != clientSpanID || run.Parent.TraceID().String() != clientTraceID {
		t.Errorf("the run's span: kind %v, parent %v; want a server span, the client's span's child", run.SpanKind, run.Parent)
	}
	wantAttrs(t, run, map[string]string{"mcpmux.task.id": task, "gen_ai.tool.name": "lab__slow", "mcpmux.identity": "reader",
		"mcpmux.server.alias": "lab", "mcp.protocol.version": "2025-11-25", "network.transport": "tcp"})
	if cli := spanNamed(t, exp, "tools/call slow"); cli.Parent.SpanID() != run.SpanContext.SpanID() {
		t.Errorf("the call to the child's span has parent %v, want the run's %v", cli.Parent.SpanID(), run.SpanContext.SpanID())
	}
	gets := spansNamed(exp, "tasks/get")
	if len(gets) == 0 {
		t.Error("no span of tasks/get")
	}
	for _, s := range append(gets, spanNamed(t, exp, "tasks/result")) {
		wantAttrs(t, s, map[string]string{"mcpmux.task.id": task, "mcp.method.name": s.Name, "mcpmux.identity": "reader"})
		var linked bool
		for _, l := range s.Links {
			for _, kv := range l.Attributes {
				linked = linked || l.SpanContext.SpanID() == run.SpanContext.SpanID() && kv.Key == telemetry.AttrLinkKind && kv.Value.AsString() == telemetry.LinkTask
			}
		}
		if !linked || s.SpanKind != trace.SpanKindServer {
			t.Errorf("%s's span: kind %v, links %v; want a server span linked to the run's %v", s.Name, s.SpanKind, s.Links, run.SpanContext.SpanID())
		}
	}
}

// TestTraceOfASealedTask: with replicas, the spans of a task's run, its
// tasks/get and its tasks/result name the task and the session by the
// sealed ids the client was given, not by mcp-go's own, which no client
// can look up. The id is sealed when the call is answered, so the run's
// span is named at its start or then, whichever is later; here the answer
// has nearly always gone out first.
func TestTraceOfASealedTask(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte(testsupport.NewReplicaKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Never run: the one replica's ids name it, so no peer is asked.
	node, err := replicas.New(config.Replicas{Enabled: true, KeyFile: key, Listen: "127.0.0.1:7310", Advertise: "127.0.0.1:7310",
		DialTimeout: time.Second}, config.Limits{MaxBodyBytes: 1 << 20, MaxMessageBytes: 1 << 20}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	exp, task, session := tracedTask(t, node)
	owner, local, err := node.TaskIDs().Open(task)
	if err != nil || owner != node.Self() || local == "" || local == task {
		t.Fatalf("the task id handed out, %q, opens as %q, %q, %v; want one sealed by %s", task, owner, local, err, node.Self())
	}
	if session == "" {
		t.Fatal("the client has no session id")
	}
	spans := append([]tracetest.SpanStub{spanNamed(t, exp, "tools/call lab__slow"), spanNamed(t, exp, "tasks/result")}, spansNamed(exp, "tasks/get")...)
	if len(spans) < 3 {
		t.Error("no span of tasks/get")
	}
	for _, s := range spans {
		wantAttrs(t, s, map[string]string{"mcpmux.task.id": task, "mcp.session.id": session})
	}
}
