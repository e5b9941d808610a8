package config

import (
	"net/url"
	"regexp"
)

// Telemetry is the [telemetry] table: OpenTelemetry traces, sent by OTLP.
// Each key sets what the standard OTEL_* variable of the same meaning sets
// (endpoint: OTEL_EXPORTER_OTLP_ENDPOINT, protocol:
// OTEL_EXPORTER_OTLP_PROTOCOL, service_name: OTEL_SERVICE_NAME, sampler and
// sampler_arg: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
// resource_attributes: OTEL_RESOURCE_ATTRIBUTES); where both are set the
// variable wins, so that a deployment can override the file. Read once at
// start: a reload does not change it.
type Telemetry struct {
	// Enabled turns tracing on or off; nil leaves it to whether an endpoint
	// is set, here or in the environment.
	Enabled *bool
	// Endpoint is the OTLP collector's base URL ("" for none).
	Endpoint string
	// Protocol is "grpc" or "http/protobuf"; "" for the default.
	Protocol string
	// ServiceName is the service.name of mcpmux's spans; "" for "mcpmux".
	ServiceName string
	// Sampler names the sampler (TracesSamplers); "" for the SDK's default.
	Sampler string
	// SamplerArg is the ratio of the ratio samplers; nil for the default.
	SamplerArg *float64
	// ResourceAttributes are added to the resource of every span.
	ResourceAttributes map[string]string
}

// OTLPProtocols are the values of [telemetry] protocol.
var OTLPProtocols = []string{"grpc", "http/protobuf"}

// TracesSamplers are the values of [telemetry] sampler: those
// OTEL_TRACES_SAMPLER takes.
var TracesSamplers = []string{"always_on", "always_off", "traceidratio",
	"parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

var attrNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.\-]*$`)

func (d *decoder) telemetry(t *table, tel *Telemetry) {
	var on bool
	if t.boolean("enabled", &on) {
		tel.Enabled = &on
	}
	if t.str("endpoint", &tel.Endpoint) {
		if u, err := url.Parse(tel.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.errorf("endpoint", "must be an http:// or https:// URL, not %q", tel.Endpoint)
		}
	}
	t.oneOf("protocol", &tel.Protocol, OTLPProtocols)
	if t.str("service_name", &tel.ServiceName) && tel.ServiceName == "" {
		t.errorf("service_name", "must not be empty")
	}
	t.oneOf("sampler", &tel.Sampler, TracesSamplers)
	var arg float64
	if t.number("sampler_arg", &arg) {
		if arg < 0 || arg > 1 {
			t.errorf("sampler_arg", "must be between 0 and 1, not %v", arg)
		}
		tel.SamplerArg = &arg
	}
	d.stringMap(t, "resource_attributes", &tel.ResourceAttributes, "attribute", attrNameRE.MatchString, nil)
	t.finish()
}
