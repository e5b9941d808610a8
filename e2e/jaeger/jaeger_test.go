// Package jaeger checks mcpmux's traces end to end: the real binary sends
// OTLP to a real Jaeger, and one trace there holds the client's span as
// the parent of mcpmux's server span, its client span, and the span
// context the lab child got.
package jaeger

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }

// JaegerVersion is the Jaeger test.sh builds (tools/jaeger/go.mod).
const JaegerVersion = "v1.75.0"

// jaegerBinary is the Jaeger test.sh built: $MCPMUX_JAEGER, or its place
// in the cache test.sh keeps it in.
func jaegerBinary(t *testing.T) string {
	bin := os.Getenv("MCPMUX_JAEGER")
	if bin == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory (%v) and MCPMUX_JAEGER unset: the Jaeger binary test.sh builds is not here", err)
		}
		bin = filepath.Join(dir, "mcpmux", "jaeger-"+JaegerVersion, "jaeger")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("Jaeger %s is not built (%s): test.sh builds it", JaegerVersion, bin)
	}
	return bin
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startJaeger runs Jaeger with memory storage, OTLP over HTTP and its
// query API on ports of their own, until t ends; it returns the OTLP
// endpoint and the query API's base URL.
func startJaeger(t *testing.T) (otlp, query string) {
	t.Helper()
	bin := jaegerBinary(t)
	otlp = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	query = fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 1000
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, query, freePort(t), otlp)
	file := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	log := &testsupport.SyncBuffer{}
	cmd := exec.Command(bin, "--config=file:"+file)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Jaeger: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	testsupport.WaitFor(t, "Jaeger's query API", func() bool {
		resp, err := http.Get("http://" + query + "/api/services")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return otlp, "http://" + query
}

// jaegerSpan is a span as Jaeger's query API gives it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(key string) string {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value)
		}
	}
	return ""
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// traceSpans waits until Jaeger holds want spans of traceID and returns
// them by operation name.
func traceSpans(t *testing.T, query, traceID string, want int) map[string]jaegerSpan {
	t.Helper()
	var spans []jaegerSpan
	testsupport.WaitFor(t, fmt.Sprintf("%d spans of trace %s in Jaeger", want, traceID), func() bool {
		resp, err := http.Get(query + "/api/traces/" + traceID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Data []struct{ Spans []jaegerSpan } `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data) != 1 {
			return false
		}
		spans = body.Data[0].Spans
		return len(spans) >= want
	})
	byName := map[string]jaegerSpan{}
	for _, s := range spans {
		byName[s.OperationName] = s
	}
	return byName
}

// callWithTrace calls name with the client's trace context (its own span
// clientSpan of trace traceID) in _meta.
func callWithTrace(m *testsupport.Mux, name, traceID, clientSpan string) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = map[string]any{}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + traceID + "-" + clientSpan + "-01"}}
	return m.Client.CallTool(ctx, req)
}

func TestTraceInJaeger(t *testing.T) {
	otlp, query := startJaeger(t)
	lab := testsupport.NewLab(t, "", testsupport.Server{Alias: "lab", Env: map[string]string{"LAB_META_TOOL": "1"}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`+"\n"+`deny = ["lab__crash_for_test"]`)
	m := testsupport.StartMuxWith(t, lab, func(cmd *exec.Cmd) {
		cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+otlp, "OTEL_SERVICE_NAME=mcpmux-e2e",
			"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=50")
	})

	const traceID, clientSpan = "5af7183fb1d4cf5f0a1b2c3d4e5f6071", "b7ad6b7169203331"
	res, err := callWithTrace(m, "lab__meta", traceID, clientSpan)
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("call: %v %+v\nlog:\n%s", err, res, m.Log.Text())
	}
	spans := traceSpans(t, query, traceID, 2)
	srv, ok1 := spans["tools/call lab__meta"]
	cli, ok2 := spans["tools/call meta"]
	if !ok1 || !ok2 {
		t.Fatalf("trace %s holds %v, want mcpmux's server and client spans", traceID, spans)
	}
	if srv.parent() != clientSpan {
		t.Errorf("server span's parent %q, want the client's span %s", srv.parent(), clientSpan)
	}
	if cli.parent() != srv.SpanID {
		t.Errorf("client span's parent %q, want the server span %s", cli.parent(), srv.SpanID)
	}
	for k, v := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "lab__meta",
		"gen_ai.operation.name": "execute_tool", "network.transport": "pipe", "mcpmux.identity": "reader",
		"mcpmux.policy.decision": "allowed", "mcpmux.server.alias": "lab", "span.kind": "server"} {
		if got := srv.tag(k); got != v {
			t.Errorf("server span: %s = %q, want %q", k, got, v)
		}
	}
	if got := cli.tag("span.kind"); got != "client" {
		t.Errorf("client span: span.kind = %q", got)
	}
	// The child's hop: the child got the client span's context.
	text := res.Content[0].(mcp.TextContent).Text
	if want := `"traceparent":"00-` + traceID + `-` + cli.SpanID + `-01"`; !strings.Contains(text, want) {
		t.Errorf("the child got _meta %s, want %s", text, want)
	}

	// A refused call: its server span alone, with the refusal.
	const refusedTrace = "6af7183fb1d4cf5f0a1b2c3d4e5f6072"
	if _, err := callWithTrace(m, "lab__crash_for_test", refusedTrace, clientSpan); err == nil {
		t.Fatal("the denied call was not refused")
	}
	refused := traceSpans(t, query, refusedTrace, 1)["tools/call lab__crash_for_test"]
	if refused.tag("error.type") != "-32602" || refused.tag("mcpmux.policy.decision") != "denied" || refused.parent() != clientSpan {
		t.Errorf("refused call's span: %+v", refused)
	}
}
