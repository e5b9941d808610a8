package main

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/config"
)

// The keys outside the server list that a reload names as needing a
// restart, spelled as the config file spells them.
func TestRestartKeys(t *testing.T) {
	old := &config.Config{Mux: config.Mux{CallTimeout: time.Minute, MaxNameLength: 64}, Upstream: config.Upstream{Listen: "127.0.0.1:8080"}}
	next := *old
	next.Mux.CallTimeout = time.Second
	next.Mux.MaxNameLength = 32
	next.Upstream.Listen = "127.0.0.1:9090"
	next.Servers = []config.Server{{Alias: "docs"}}
	want := []string{"mux.max_name_length", "mux.call_timeout", "upstream.listen"}
	if got := restartKeys(old, &next); !slices.Equal(got, want) {
		t.Errorf("restartKeys = %v, want %v", got, want)
	}
	if got := restartKeys(old, old); len(got) != 0 {
		t.Errorf("restartKeys of the same config = %v, want none", got)
	}
	for in, want := range map[string]string{"CallTimeout": "call_timeout", "PolicyDir": "policy_dir", "MaxNameLength": "max_name_length", "JWT": "jwt", "TLSCert": "tls_cert"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}
