package telemetry

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkCallSpans is the tracing work of one tools/call through
// mcpmux without the call: its server span, the events and attributes the
// pipeline adds, its client span and the child's _meta, every span
// sampled and batched to an exporter that drops them.
func BenchmarkCallSpans(b *testing.B) {
	for _, proc := range []struct {
		name string
		opt  sdktrace.TracerProviderOption
	}{{"batcher", sdktrace.WithBatcher(discard{})}, {"syncer", sdktrace.WithSyncer(discard{})}} {
		b.Run(proc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), proc.opt)
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			tr := New(tp)
			r := Request{Method: "tools/call", Target: "echo__echo", ID: []byte("3"), Protocol: "2025-11-25",
				Transport: TransportPipe, Identity: "bench"}
			b.ReportAllocs()
			for b.Loop() {
				ctx, span := tr.Server(context.Background(), r)
				ArgumentsChecked(ctx, true)
				AdmissionWaited(ctx, time.Microsecond)
				cctx, cspan := tr.Client(ctx, "tools/call", "echo", "echo", TransportPipe)
				_ = MetaFor(cctx, nil, `"mcpmux-7"`)
				EndClient(cspan, "", nil)
				Decided(ctx, Decision{Server: "echo", Decision: "allow", Outcome: "ok"})
				EndServer(span, 0, "", false)
			}
		})
	}
}
