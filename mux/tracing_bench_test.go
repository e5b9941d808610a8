package mux

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// discard is an exporter that drops what it is given: the SDK's whole
// work, span processor and batching included, without a collector's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// benchTracedMux is benchMux with tracing on: every request sampled,
// batched to an exporter that drops the spans.
func benchTracedMux(b *testing.B, tools int) *client.Client {
	b.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return benchMuxWith(b, tools, Options{Tracing: telemetry.New(tp)})
}

// BenchmarkCallTracing is BenchmarkCall's echo call, serial over stdio,
// with tracing off and on (benchTracedMux), in one run: two Muxes, each
// with its own echo child, built once, and every iteration one call on
// each, the order alternating, so that what the machine does meanwhile
// falls on both alike. It reports each side's p50 and their ratio (ns/op
// is of the two calls together); then, untimed, each side's allocations
// per call over 500 more calls (runtime.MemStats.Mallocs, as allocs/op
// counts them: every goroutine's, the batcher's included).
//
// client=plain is a client that sends no trace context: on, the child
// gets a _meta it did not get off, and parses it (mcp-go's server reads
// a request's _meta twice). client=traced is a client with a trace of its
// own, a traceparent in each call's _meta: both children get one (off, the
// client's, relayed; on, mcpmux's), so the ratio is mcpmux's own cost.
func BenchmarkCallTracing(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "client=plain"
		if traced {
			name = "client=traced"
		}
		b.Run(name, func(b *testing.B) { benchCallTracing(b, traced) })
	}
}

func benchCallTracing(b *testing.B, clientTraced bool) {
	sides := [2]*client.Client{benchMux(b, 100), benchTracedMux(b, 100)}
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo__echo"
	req.Params.Arguments = map[string]any{"text": "hello"}
	if clientTraced {
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{
			"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	}
	once := func(c *client.Client) {
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		if res.IsError {
			b.Fatalf("echo__echo: %v", res.Content)
		}
	}
	var took [2][]time.Duration
	call := func(side int) {
		start := time.Now()
		once(sides[side])
		took[side] = append(took[side], time.Since(start))
	}
	for i := range 200 { // warm both: the children, the pools, the batcher
		call(i % 2)
		call(1 - i%2)
	}
	took = [2][]time.Duration{}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		call(i % 2)
		call(1 - i%2)
	}
	b.StopTimer()
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	off, on := p50(took[0]), p50(took[1])
	b.ReportMetric(float64(off.Nanoseconds())/1e3, "off-p50-µs")
	b.ReportMetric(float64(on.Nanoseconds())/1e3, "on-p50-µs")
	b.ReportMetric(float64(on)/float64(off), "on/off-p50")
	const calls = 500
	var ms runtime.MemStats
	for side, unit := range [2]string{"off-allocs/call", "on-allocs/call"} {
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		for range calls {
			once(sides[side])
		}
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.Mallocs-before)/calls, unit)
	}
}
