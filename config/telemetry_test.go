package config

import (
	"strings"
	"testing"
)

func TestTelemetryTable(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	cfg, err := Parse("/etc/mcpmux.toml", []byte(`[telemetry]
endpoint = "http://collector:4318"
protocol = "grpc"
service_name = "gw"
sampler = "traceidratio"
sampler_arg = 0.25
resource_attributes = { "deployment.environment" = "prod" }

[servers.a]
command = "/bin/true"
`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	tel := cfg.Telemetry
	if tel.Endpoint != "http://collector:4318" || tel.Protocol != "grpc" || tel.ServiceName != "gw" || tel.Sampler != "traceidratio" ||
		tel.SamplerArg == nil || *tel.SamplerArg != 0.25 || tel.ResourceAttributes["deployment.environment"] != "prod" || tel.Enabled != nil {
		t.Errorf("decoded %+v", tel)
	}
	_, err = Parse("/etc/mcpmux.toml", []byte("[telemetry]\nendpoint = \"collector\"\nprotocol = \"http/json\"\nsampler_arg = 2\nsampeler = \"x\"\n\n[servers.a]\ncommand = \"/bin/true\"\n"), noEnv)
	for _, want := range []string{
		`/etc/mcpmux.toml:2: [telemetry] endpoint: must be an http:// or https:// URL`,
		`/etc/mcpmux.toml:3: [telemetry] protocol: must be one of grpc, http/protobuf`,
		`/etc/mcpmux.toml:4: [telemetry] sampler_arg: must be between 0 and 1`,
		`/etc/mcpmux.toml:5: [telemetry] sampeler: unknown key (did you mean sampler?)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
}
