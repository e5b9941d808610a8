package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// traceRequests has the lab emit a span of its own, service.name
// "labserver", for every tools/call, prompts/get and resources/read it
// gets, the child of the trace context in the request's _meta
// (traceparent, tracestate), exported synchronously by OTLP over HTTP to
// endpoint (LAB_OTLP_ENDPOINT): what a traced child on the far side of
// mcpmux's hop would send. It returns the func that flushes and stops the
// exporter.
func traceRequests(hooks *server.Hooks, endpoint string) (func(), error) {
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("the OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("labserver"))))
	tracer := tp.Tracer("labserver")
	prop := propagation.TraceContext{}
	hooks.AddBeforeAny(func(ctx context.Context, _ any, method mcp.MCPMethod, message any) {
		var meta *mcp.Meta
		var target string
		var attr attribute.KeyValue
		switch r := message.(type) {
		case *mcp.CallToolRequest:
			meta, target, attr = r.Params.Meta, r.Params.Name, semconv.GenAIToolName(r.Params.Name)
		case *mcp.GetPromptRequest:
			meta, target, attr = r.Params.Meta, r.Params.Name, semconv.GenAIPromptName(r.Params.Name)
		case *mcp.ReadResourceRequest:
			meta, target, attr = r.Params.Meta, r.Params.URI, semconv.McpResourceURI(r.Params.URI)
		default:
			return
		}
		carrier := propagation.MapCarrier{}
		if meta != nil {
			for _, k := range []string{"traceparent", "tracestate"} {
				if s, ok := meta.AdditionalFields[k].(string); ok {
					carrier[k] = s
				}
			}
		}
		_, span := tracer.Start(prop.Extract(ctx, carrier), string(method)+" "+target, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.McpMethodNameKey.String(string(method)), attr))
		span.End()
	})
	return func() { _ = tp.Shutdown(context.Background()) }, nil
}
