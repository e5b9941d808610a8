package telemetry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/config"
)

// instrumentation is the name of the tracer mcpmux's spans come from.
const instrumentation = "github.com/mcpmux/mcpmux"

// Tracing is tracing turned on: the tracer of mcpmux's spans and, when
// Start built it, the provider to flush on exit. A nil *Tracing is tracing
// off.
type Tracing struct {
	tracer trace.Tracer
	tp     *sdktrace.TracerProvider // nil when given by New
	// Endpoint and Protocol are where spans go, for the start-up log line.
	Endpoint, Protocol string
}

// New is tracing with spans from tp (a test's provider over the SDK's
// in-memory exporter, say).
func New(tp trace.TracerProvider) *Tracing {
	return &Tracing{tracer: tp.Tracer(instrumentation)}
}

// Shutdown flushes the spans not yet sent and stops the exporter. It is a
// no-op for tracing off or given by New.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.tp == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flushing spans to %s: %w", t.Endpoint, err)
	}
	return nil
}

// Start turns tracing on as tel and the environment (getenv) say, and
// returns nil, nil when they leave it off. Tracing is on when tel.Enabled
// is true, or is unset and an OTLP endpoint is set in tel or the
// environment; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn
// it off. The SDK reads the OTEL_* variables itself; tel's keys are given
// to it only where the variable is unset.
func Start(ctx context.Context, tel config.Telemetry, getenv func(string) (string, bool), version string) (*Tracing, error) {
	env := func(k string) string { v, _ := getenv(k); return strings.TrimSpace(v) }
	if !on(tel, env) {
		return nil, nil
	}
	protocol := firstOf(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), env("OTEL_EXPORTER_OTLP_PROTOCOL"), tel.Protocol, "http/protobuf")
	envEndpoint := env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	var exp sdktrace.SpanExporter
	var err error
	endpoint := firstOf(env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), env("OTEL_EXPORTER_OTLP_ENDPOINT"), tel.Endpoint)
	switch protocol {
	case "grpc":
		var opts []otlptracegrpc.Option
		if !envEndpoint && tel.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(tel.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if !envEndpoint && tel.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(tel.Endpoint)))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("telemetry: OTLP protocol %q is not one mcpmux sends (grpc, http/protobuf)", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP %s exporter: %w", protocol, err)
	}
	res, err := resourceOf(ctx, tel, version)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("telemetry: the resource of mcpmux's spans: %w", err), exp.Shutdown(ctx))
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if env("OTEL_TRACES_SAMPLER") == "" && tel.Sampler != "" {
		opts = append(opts, sdktrace.WithSampler(samplerOf(tel.Sampler, tel.SamplerArg)))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{tracer: tp.Tracer(instrumentation), tp: tp, Endpoint: endpoint, Protocol: protocol}, nil
}

// on reports whether tel and the environment turn tracing on.
func on(tel config.Telemetry, env func(string) string) bool {
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") || env("OTEL_TRACES_EXPORTER") == "none" {
		return false
	}
	if tel.Enabled != nil {
		return *tel.Enabled
	}
	return tel.Endpoint != "" || env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// tracesURL is base, an endpoint as OTEL_EXPORTER_OTLP_ENDPOINT gives it,
// with the traces path the variable's value gets appended.
func tracesURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base // config checked it
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String()
}

// resourceOf is the resource of mcpmux's spans: service.name (tel's or
// "mcpmux") and version, tel's attributes, then OTEL_RESOURCE_ATTRIBUTES
// and OTEL_SERVICE_NAME, which override them.
func resourceOf(ctx context.Context, tel config.Telemetry, version string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(firstOf(tel.ServiceName, "mcpmux")), semconv.ServiceVersion(version)}
	for _, k := range slices.Sorted(maps.Keys(tel.ResourceAttributes)) {
		attrs = append(attrs, attribute.String(k, tel.ResourceAttributes[k]))
	}
	return resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv())
}

// samplerOf is the sampler name (one of config.TracesSamplers) stands for,
// with arg the ratio of a ratio sampler (1 when nil).
func samplerOf(name string, arg *float64) sdktrace.Sampler {
	ratio := 1.0
	if arg != nil {
		ratio = *arg
	}
	switch name {
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.AlwaysSample()
}
