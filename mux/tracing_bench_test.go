package mux

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// discard is an exporter that drops what it is given: the SDK's whole
// work, span processor and batching included, without a collector's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkCallTracing is BenchmarkCall's echo call, serial over stdio,
// with tracing off and on (every request sampled, batched to an exporter
// that drops them). Run with -count to interleave the two, and compare
// their medians.
func BenchmarkCallTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		c := benchMux(b, 100)
		args := map[string]any{"text": "hello"}
		b.ReportAllocs()
		for b.Loop() {
			benchCall(b, c, "echo__echo", args)
		}
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		c := benchMuxWith(b, 100, Options{Tracing: telemetry.New(tp)})
		args := map[string]any{"text": "hello"}
		b.ReportAllocs()
		for b.Loop() {
			benchCall(b, c, "echo__echo", args)
		}
	})
}
