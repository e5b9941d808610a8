package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
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

// TestMetaForWritesWhatThePropagatorWould checks MetaFor's own writing of
// the trace context against the W3C propagators', for a _meta without
// trace members (copied as written, the trace context after its members),
// and baggage and tracestate with characters JSON escapes.
func TestMetaForWritesWhatThePropagatorWould(t *testing.T) {
	tr, _ := tracing(t)
	for _, c := range []struct{ name, meta, baggage, tracestate string }{
		{"none", "", "", ""},
		{"empty", ` { } `, "", ""},
		{"members", `{"progressToken" : "mcpmux-1", "x":[1, 2]}`, "", ""},
		{"escapes", `{"x":"y"}`, "k=a%22b;p=<1>&q,l=v", `v=x<y,b=c`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("traceparent", parent)
			if c.baggage != "" {
				h.Set("baggage", c.baggage)
			}
			if c.tracestate != "" {
				h.Set("tracestate", c.tracestate)
			}
			ctx, span := tr.Server(tr.ExtractHTTP(context.Background(), h), Request{Method: "tools/list"})
			defer span.End()
			var meta []byte
			if c.meta != "" {
				meta = []byte(c.meta)
			}
			got := MetaFor(ctx, meta, `"mcpmux-1"`)
			var members map[string]any
			if err := json.Unmarshal(got, &members); err != nil {
				t.Fatalf("MetaFor wrote %s: %v", got, err)
			}
			want := map[string]any{}
			if meta != nil {
				_ = json.Unmarshal(meta, &want)
			}
			for k, v := range Headers(ctx) {
				want[k] = v
			}
			// A baggage's members come in no fixed order (each String of
			// it walks a map): compared as a set.
			for _, m := range []map[string]any{members, want} {
				if b, ok := m["baggage"].(string); ok {
					list := strings.Split(b, ",")
					slices.Sort(list)
					m["baggage"] = strings.Join(list, ",")
				}
			}
			if !reflect.DeepEqual(members, want) {
				t.Errorf("MetaFor: %s\nwant the members %v", got, want)
			}
			if c.name == "members" && !strings.HasPrefix(string(got), `{"progressToken" : "mcpmux-1", "x":[1, 2],"traceparent":`) {
				t.Errorf("MetaFor did not keep the client's members as written: %s", got)
			}
			if c.name == "escapes" && (!strings.Contains(string(got), `\u003c1\u003e\u0026q`) || !strings.Contains(string(got), `"v=x\u003cy,b=c"`)) {
				t.Errorf("MetaFor did not escape as encoding/json does: %s", got)
			}
		})
	}
}

func TestIDString(t *testing.T) {
	for id, want := range map[string]string{`7`: "7", `"mcpmux-3"`: "mcpmux-3", `"a\"b\u0041"`: `a"bA`, `""`: ""} {
		if got := idString([]byte(id)); got != want {
			t.Errorf("idString(%s) = %q, want %q", id, got, want)
		}
	}
}
