// Package jaeger checks mcpmux's traces end to end: the real binary, the
// test's client and the lab child each send OTLP to a real Jaeger, and one
// trace there holds the client's span as the parent of mcpmux's server
// span, its client span, and the lab child's own span.
package jaeger

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

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

// jaegerSpan is a span as Jaeger's query API gives it, with the name of
// the service that sent it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	ProcessID     string `json:"processID"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	service string
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
// them by service and operation name: "mcpmux-e2e tools/call lab__meta".
func traceSpans(t *testing.T, query, traceID string, want int) map[string]jaegerSpan {
	t.Helper()
	byName := map[string]jaegerSpan{}
	testsupport.WaitFor(t, fmt.Sprintf("%d spans of trace %s in Jaeger", want, traceID), func() bool {
		resp, err := http.Get(query + "/api/traces/" + traceID)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Data []struct {
				Spans     []jaegerSpan
				Processes map[string]struct {
					ServiceName string `json:"serviceName"`
				}
			} `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Data) != 1 || len(body.Data[0].Spans) < want {
			return false
		}
		for _, s := range body.Data[0].Spans {
			s.service = body.Data[0].Processes[s.ProcessID].ServiceName
			byName[s.service+" "+s.OperationName] = s
		}
		return true
	})
	return byName
}

// The services of a trace's spans.
const (
	clientService = "e2e-client"
	muxService    = "mcpmux-e2e"
	labService    = "labserver"
)

// clientTracer is the test's own tracer, the client's, exporting each span
// to Jaeger's OTLP endpoint otlp as it ends.
func clientTracer(t *testing.T, otlp string) trace.Tracer {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL("http://"+otlp+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(clientService))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("e2e")
}

// request is one of the requests whose trace is checked.
type request struct {
	what    string
	server  string            // mcpmux's server span's name
	client  string            // its client span's name; "" for a refused request
	lab     string            // the lab's span's name
	attrs   map[string]string // the server span's attributes beyond the common ones
	cattrs  map[string]string // the client span's
	refused bool
}

var requests = []request{
	{what: "call", server: "tools/call lab__meta", client: "tools/call meta", lab: "tools/call meta",
		attrs:  map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "lab__meta", "gen_ai.operation.name": "execute_tool", "mcpmux.policy.decision": "allowed", "mcpmux.outcome": "ok"},
		cattrs: map[string]string{"gen_ai.tool.name": "meta"}},
	{what: "refused call", server: "tools/call lab__crash_for_test", refused: true,
		attrs: map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "lab__crash_for_test", "mcpmux.policy.decision": "denied", "mcpmux.outcome": "refused", "error.type": "-32602"}},
	{what: "prompt", server: "prompts/get lab__brief", client: "prompts/get brief", lab: "prompts/get brief",
		attrs:  map[string]string{"mcp.method.name": "prompts/get", "gen_ai.prompt.name": "lab__brief", "mcpmux.outcome": "ok"},
		cattrs: map[string]string{"gen_ai.prompt.name": "brief"}},
	{what: "read", server: "resources/read " + readURI, client: "resources/read " + labReadme, lab: "resources/read " + labReadme,
		attrs:  map[string]string{"mcp.method.name": "resources/read", "mcp.resource.uri": readURI, "mcpmux.outcome": "ok"},
		cattrs: map[string]string{"mcp.resource.uri": labReadme}},
}

const (
	labReadme = "file:///lab/readme.txt"
	readURI   = "mcpmux://lab/" + labReadme
)

// send makes r's request on c, with the trace context of ctx in _meta
// (meta) or, over HTTP, in the headers c's HeaderFunc takes from ctx.
func send(ctx context.Context, c *client.Client, r request, meta *mcp.Meta) error {
	ctx, cancel := context.WithTimeout(ctx, testsupport.Wait)
	defer cancel()
	var err error
	switch r.what {
	case "call", "refused call":
		req := mcp.CallToolRequest{}
		req.Params.Name = strings.Fields(r.server)[1]
		req.Params.Arguments = map[string]any{}
		req.Params.Meta = meta
		var res *mcp.CallToolResult
		if res, err = c.CallTool(ctx, req); err == nil && res.IsError {
			err = fmt.Errorf("result with isError: %+v", res.Content)
		}
	case "prompt":
		req := mcp.GetPromptRequest{}
		req.Params.Name = "lab__brief"
		req.Params.Arguments = map[string]string{"topic": "traces"}
		req.Params.Meta = meta
		_, err = c.GetPrompt(ctx, req)
	case "read":
		req := mcp.ReadResourceRequest{}
		req.Params.URI = readURI
		req.Params.Meta = meta
		_, err = c.ReadResource(ctx, req)
	}
	return err
}

// TestTraceInJaeger: the real binary's traces in a real Jaeger, for a call,
// a refused call, a prompt and a read, from a client over stdio (its trace
// context in _meta) and over HTTP (in the traceparent header). Each trace
// holds the client's span, mcpmux's server span its child with the
// request's attributes, mcpmux's client span the server span's child, and
// the lab child's own span, the client span's child (the context it got in
// _meta); a refused request's trace ends at the server span.
func TestTraceInJaeger(t *testing.T) {
	otlp, query := startJaeger(t)
	lab := testsupport.NewLab(t, "", testsupport.Server{Alias: "lab",
		Env: map[string]string{"LAB_META_TOOL": "1", "LAB_FIDELITY": "1", "LAB_OTLP_ENDPOINT": "http://" + otlp}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`+"\n"+`deny = ["lab__crash_for_test"]`+"\n"+`allow_resources = ["lab"]`)
	lab.AddUpstream(t, `listen = "127.0.0.1:0"`)
	m := testsupport.StartHTTPMux(t, lab, testsupport.HTTPStart{Stdio: true, Args: []string{"--stdio"},
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + otlp, "OTEL_SERVICE_NAME=" + muxService,
			"OTEL_TRACES_SAMPLER=always_on", "OTEL_BSP_SCHEDULE_DELAY=50"}})
	tracer := clientTracer(t, otlp)
	prop := propagation.TraceContext{}
	h := testsupport.ConnectHTTP(t, m.URL(), testsupport.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: m.Log,
		HeaderFunc: func(ctx context.Context) map[string]string {
			c := propagation.MapCarrier{}
			prop.Inject(ctx, c)
			return c
		}})

	for _, edge := range []string{"stdio", "http"} {
		for _, r := range requests {
			t.Run(edge+"/"+r.what, func(t *testing.T) {
				ctx, span := tracer.Start(context.Background(), edge+" "+r.what, trace.WithSpanKind(trace.SpanKindClient))
				var err error
				if edge == "stdio" {
					c := propagation.MapCarrier{}
					prop.Inject(ctx, c)
					err = send(ctx, m.Stdio.Client, r, &mcp.Meta{AdditionalFields: map[string]any{"traceparent": c["traceparent"]}})
				} else {
					err = send(ctx, h.Client, r, nil)
				}
				span.End()
				if (err != nil) != r.refused {
					t.Fatalf("%s: %v (refused: %v)\nlog:\n%s", r.what, err, r.refused, m.Log.Text())
				}
				want := 4
				if r.refused {
					want = 2
				}
				traceID := span.SpanContext().TraceID().String()
				spans := traceSpans(t, query, traceID, want)
				cl, ok := spans[clientService+" "+edge+" "+r.what]
				srv, ok2 := spans[muxService+" "+r.server]
				if !ok || !ok2 {
					t.Fatalf("trace %s holds %v, want the client's span and mcpmux's server span %q", traceID, keys(spans), r.server)
				}
				if srv.parent() != cl.SpanID {
					t.Errorf("server span's parent %q, want the client's span %s", srv.parent(), cl.SpanID)
				}
				transport := map[string]string{"stdio": "pipe", "http": "tcp"}[edge]
				attrs := map[string]string{"span.kind": "server", "network.transport": transport, "mcpmux.identity": "reader",
					"mcp.protocol.version": mcp.LATEST_LEGACY_PROTOCOL_VERSION, "mcpmux.server.alias": "lab"}
				maps.Copy(attrs, r.attrs)
				for k, v := range attrs {
					if got := srv.tag(k); got != v {
						t.Errorf("server span: %s = %q, want %q", k, got, v)
					}
				}
				if sid := srv.tag("mcp.session.id"); (sid != "") != (edge == "http") {
					t.Errorf("server span: mcp.session.id = %q over %s", sid, edge)
				}
				if r.refused {
					if len(spans) != 2 {
						t.Errorf("a refused request's trace holds %v, want the client's span and the server span", keys(spans))
					}
					return
				}
				cli, ok := spans[muxService+" "+r.client]
				child, ok2 := spans[labService+" "+r.lab]
				if !ok || !ok2 {
					t.Fatalf("trace %s holds %v, want mcpmux's client span %q and the lab's %q", traceID, keys(spans), r.client, r.lab)
				}
				if cli.parent() != srv.SpanID {
					t.Errorf("client span's parent %q, want the server span %s", cli.parent(), srv.SpanID)
				}
				if child.parent() != cli.SpanID {
					t.Errorf("the lab's span's parent %q, want mcpmux's client span %s", child.parent(), cli.SpanID)
				}
				cattrs := map[string]string{"span.kind": "client", "mcpmux.server.alias": "lab", "network.transport": "pipe",
					"mcp.method.name": r.attrs["mcp.method.name"]}
				maps.Copy(cattrs, r.cattrs)
				for k, v := range cattrs {
					if got := cli.tag(k); got != v {
						t.Errorf("client span: %s = %q, want %q", k, got, v)
					}
				}
				if !strings.HasPrefix(cli.tag("jsonrpc.request.id"), "mcpmux-") {
					t.Errorf("client span: jsonrpc.request.id = %q, want mcpmux's own id", cli.tag("jsonrpc.request.id"))
				}
			})
		}
	}
}

// keys are the names of spans, for a failure's message.
func keys(spans map[string]jaegerSpan) []string {
	return slices.Sorted(maps.Keys(spans))
}
