package main

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/config"
)

// The keys outside the server list that a reload puts in force or names as
// needing a restart, spelled as the config file spells them, and what it
// puts in force.
func TestChangedKeys(t *testing.T) {
	old := &config.Config{Mux: config.Mux{CallTimeout: time.Minute, MaxNameLength: 64, LogLevel: "info"},
		Upstream: config.Upstream{Listen: "127.0.0.1:8080"}, Limits: config.Limits{RateLimit: 5}}
	next := *old
	next.Mux.CallTimeout = time.Second
	next.Mux.MaxNameLength = 32
	next.Mux.LogLevel = "debug"
	next.Upstream.Listen = "127.0.0.1:9090"
	next.Limits.RateLimit = 10
	next.Servers = []config.Server{{Alias: "docs"}}
	ratio := 0.5
	next.Telemetry = config.Telemetry{Endpoint: "http://collector:4318", SamplerArg: &ratio}
	live, restart := changedKeys(old, &next)
	if want := []string{"mux.call_timeout", "mux.log_level", "limits.rate_limit"}; !slices.Equal(live, want) {
		t.Errorf("live keys = %v, want %v", live, want)
	}
	if want := []string{"mux.max_name_length", "upstream.listen", "telemetry.endpoint", "telemetry.sampler_arg"}; !slices.Equal(restart, want) {
		t.Errorf("restart keys = %v, want %v", restart, want)
	}
	if live, restart := changedKeys(old, old); len(live)+len(restart) != 0 {
		t.Errorf("changedKeys of the same config = %v, %v, want none", live, restart)
	}
	got := inForce(old, &next)
	if got.Mux.CallTimeout != time.Second || got.Mux.LogLevel != "debug" || got.Limits.RateLimit != 10 || len(got.Servers) != 1 {
		t.Errorf("in force: the live keys and the servers of the new version, got %+v", got)
	}
	if got.Mux.MaxNameLength != 64 || got.Upstream.Listen != "127.0.0.1:8080" || got.Telemetry.Endpoint != "" || got.Telemetry.SamplerArg != nil {
		t.Errorf("in force: the restart-only keys as mcpmux started, got max_name_length %d, listen %q", got.Mux.MaxNameLength, got.Upstream.Listen)
	}
	if next.Mux.MaxNameLength != 32 {
		t.Error("inForce changed the version it was given")
	}
	// Pinning between warn and enforce is live; turned off or on it is not.
	for _, c := range []struct {
		from, to string
		live     bool
	}{{config.PinningWarn, config.PinningEnforce, true}, {config.PinningEnforce, config.PinningWarn, true},
		{config.PinningWarn, config.PinningOff, false}, {config.PinningOff, config.PinningEnforce, false}} {
		a, b := *old, *old
		a.Mux.Pinning, b.Mux.Pinning = c.from, c.to
		live, restart := changedKeys(&a, &b)
		if got := slices.Equal(live, []string{"mux.pinning"}); got != c.live || len(live)+len(restart) != 1 {
			t.Errorf("pinning %s to %s: live %v, restart %v; want live %v", c.from, c.to, live, restart, c.live)
		}
		if in := inForce(&a, &b); (in.Mux.Pinning == c.to) != c.live {
			t.Errorf("pinning %s to %s: %s in force", c.from, c.to, in.Mux.Pinning)
		}
	}
	// [replicas] is read once, at start: each key of it, and the table
	// itself added or removed, needs a restart.
	on := config.Replicas{Enabled: true, KeyFile: "/keys/replicas", Listen: ":7310", Advertise: "10.0.0.1:7310",
		Peers: []string{"10.0.0.2:7310"}, DialTimeout: config.DefaultPeerDialTimeout}
	for _, c := range []struct {
		what     string
		from, to config.Replicas
		restart  []string
	}{
		{"the table added", config.Replicas{}, on,
			[]string{"replicas", "replicas.key_file", "replicas.listen", "replicas.advertise", "replicas.peers", "replicas.dial_timeout"}},
		{"the table removed", on, config.Replicas{},
			[]string{"replicas", "replicas.key_file", "replicas.listen", "replicas.advertise", "replicas.peers", "replicas.dial_timeout"}},
		{"key_file", on, with(on, func(r *config.Replicas) { r.KeyFile = "/keys/other" }), []string{"replicas.key_file"}},
		{"listen", on, with(on, func(r *config.Replicas) { r.Listen = ":7311" }), []string{"replicas.listen"}},
		{"advertise", on, with(on, func(r *config.Replicas) { r.Advertise = "10.0.0.9:7310" }), []string{"replicas.advertise"}},
		{"a peer added", on, with(on, func(r *config.Replicas) { r.Peers = []string{"10.0.0.2:7310", "10.0.0.3:7310"} }), []string{"replicas.peers"}},
		{"peers for peers_dns", on, with(on, func(r *config.Replicas) { r.Peers, r.PeersDNS = nil, "mcpmux-peers" }),
			[]string{"replicas.peers", "replicas.peers_dns"}},
		{"dial_timeout", on, with(on, func(r *config.Replicas) { r.DialTimeout = 5 * time.Second }), []string{"replicas.dial_timeout"}},
		{"nothing", on, with(on, func(r *config.Replicas) { r.Peers = slices.Clone(r.Peers) }), nil},
	} {
		a, b := *old, *old
		a.Replicas, b.Replicas = c.from, c.to
		live, restart := changedKeys(&a, &b)
		if len(live) != 0 || !slices.Equal(restart, c.restart) {
			t.Errorf("[replicas] %s: live %v, restart %v; want live none, restart %v", c.what, live, restart, c.restart)
		}
		if in := inForce(&a, &b); !reflect.DeepEqual(in.Replicas, c.from) {
			t.Errorf("[replicas] %s: %+v in force, want %+v as mcpmux started", c.what, in.Replicas, c.from)
		}
	}
	// The names are the file's own: two versions as written, parsed.
	parse := func(replicas string) *config.Config {
		src := "[replicas]\nkey_file = \"/keys/replicas\"\nlisten = \":7310\"\nadvertise = \"10.0.0.1:7310\"\n" + replicas +
			"[servers.docs]\ncommand = \"docs\"\n"
		cfg, err := config.Parse("/etc/mcpmux/mcpmux.toml", []byte(src), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("Parse:\n%v", err)
		}
		return cfg
	}
	live, restart = changedKeys(parse("peers = [\"10.0.0.2:7310\"]\n"), parse("peers_dns = \"mcpmux-peers\"\ndial_timeout = \"5s\"\n"))
	if want := []string{"replicas.peers", "replicas.peers_dns", "replicas.dial_timeout"}; len(live) != 0 || !slices.Equal(restart, want) {
		t.Errorf("[replicas] as parsed: live %v, restart %v; want live none, restart %v", live, restart, want)
	}
	for in, want := range map[string]string{"CallTimeout": "call_timeout", "PolicyDir": "policy_dir", "MaxNameLength": "max_name_length", "JWT": "jwt", "TLSCert": "tls_cert"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// with is r changed by edit, r's slices left alone.
func with(r config.Replicas, edit func(*config.Replicas)) config.Replicas {
	r.Peers = slices.Clone(r.Peers)
	edit(&r)
	return r
}
