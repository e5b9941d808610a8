package telemetry

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpmux/mcpmux/config"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func tracing(t *testing.T) (*Tracing, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return New(tp), exp
}

func TestMetaForKeepsTheClientsMembers(t *testing.T) {
	tr, _ := tracing(t)
	meta := []byte(`{"traceparent":"` + parent + `","x":{"b" : [1, 2.50]},"baggage":"k=v","tracestate":"a=b"}`)
	ctx, span := tr.Server(context.Background(), Request{Method: "tools/call", Target: "t", Meta: meta})
	defer span.End()
	got := string(MetaFor(ctx, []byte(`{"x":{"b" : [1, 2.50]},"traceparent":"old"}`), `"mcpmux-1"`))
	want := `{"x":{"b" : [1, 2.50]},"baggage":"k=v","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-` +
		span.SpanContext().SpanID().String() + `-01","tracestate":"a=b"}`
	if got != want {
		t.Errorf("MetaFor:\n got %s\nwant %s", got, want)
	}
	if got := string(MetaFor(context.Background(), []byte(`{"traceparent":"old"}`), "1")); got != `{"traceparent":"old"}` {
		t.Errorf("MetaFor without a trace changed the _meta: %s", got)
	}
	if h := Headers(ctx); h["traceparent"] == "" || h["baggage"] != "k=v" {
		t.Errorf("Headers: %v", h)
	}
}

func TestHTTPHeadersAndMeta(t *testing.T) {
	tr, exp := tracing(t)
	h := http.Header{}
	h.Set("traceparent", parent)
	ctx := tr.ExtractHTTP(context.Background(), h)
	_, span := tr.Server(ctx, Request{Method: "tools/list"})
	EndServer(span, 0, "", false)
	other := "00-11111111111111111111111111111111-2222222222222222-01"
	_, span = tr.Server(ctx, Request{Method: "tools/list", Meta: []byte(`{"traceparent":"` + other + `"}`)})
	EndServer(span, -32602, "bad", false)
	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Parent.SpanID().String() != "00f067aa0ba902b7" || spans[1].Parent.SpanID().String() != "2222222222222222" {
		t.Fatalf("parents: %+v", spans)
	}
	if (*Tracing)(nil).ExtractHTTP(context.Background(), h) != context.Background() {
		t.Error("tracing off read the headers")
	}
}

func TestStartOnlyWhenAsked(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	ctx := context.Background()
	if tr, err := Start(ctx, config.Telemetry{}, env(nil), "1"); tr != nil || err != nil {
		t.Errorf("no endpoint: %v %v, want off", tr, err)
	}
	off := false
	if tr, _ := Start(ctx, config.Telemetry{Enabled: &off}, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}), "1"); tr != nil {
		t.Error("enabled = false did not turn tracing off")
	}
	if tr, _ := Start(ctx, config.Telemetry{Endpoint: "http://127.0.0.1:1"}, env(map[string]string{"OTEL_SDK_DISABLED": "true"}), "1"); tr != nil {
		t.Error("OTEL_SDK_DISABLED did not turn tracing off")
	}
	tr, err := Start(ctx, config.Telemetry{Endpoint: "http://127.0.0.1:1", Protocol: "grpc"},
		env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}), "1")
	if err != nil || tr == nil || tr.Protocol != "http/protobuf" || tr.Endpoint != "http://127.0.0.1:1" {
		t.Fatalf("Start: %+v %v, want on, the variable's protocol", tr, err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown with nothing to flush: %v", err)
	}
	if _, err := Start(ctx, config.Telemetry{}, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}), "1"); err == nil {
		t.Error("http/json accepted")
	}
}
