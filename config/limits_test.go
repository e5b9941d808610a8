package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLimitsErrors(t *testing.T) {
	checkErrors(t, []errorTest{
		{
			name: "size without unit it knows",
			src:  srv + "[limits]\nmax_message_bytes = \"16MB\"\n",
			want: `mcpmux.toml:4: [limits] max_message_bytes: invalid size "16MB": use a whole number of bytes or a number and a unit, such as "64KiB" or "16MiB"`,
		},
		{
			name: "size too small",
			src:  srv + "[limits]\nmax_body_bytes = 100\n",
			want: `mcpmux.toml:4: [limits] max_body_bytes: must be at least 4KiB, not 100B`,
		},
		{
			name: "size of the wrong type",
			src:  srv + "[limits]\nmax_catalog_bytes = true\n",
			want: `mcpmux.toml:4: [limits] max_catalog_bytes: must be a size, a number of bytes or a string such as "16MiB", not a boolean`,
		},
		{
			name: "size out of range",
			src:  srv + "[limits]\nmax_message_bytes = \"99999999999GiB\"\n",
			want: `mcpmux.toml:4: [limits] max_message_bytes: size "99999999999GiB" is out of range`,
		},
		{
			name: "zero sessions",
			src:  srv + "[limits]\nmax_sessions = 0\n",
			want: `mcpmux.toml:4: [limits] max_sessions: must be positive, not 0`,
		},
		{
			name: "per identity above total",
			src:  srv + "[limits]\nmax_sessions = 10\nmax_sessions_per_identity = 11\n",
			want: `mcpmux.toml:5: [limits] max_sessions_per_identity: must not exceed max_sessions (10)`,
		},
		{
			name: "negative queue",
			src:  srv + "[limits]\nmax_queued = -1\n",
			want: `mcpmux.toml:4: [limits] max_queued: must not be negative, not -1`,
		},
		{
			name: "negative rate",
			src:  srv + "[limits]\nrate_limit = -2.0\n",
			want: `mcpmux.toml:4: [limits] rate_limit: must be a number of calls per second >= 0 (0 means no limit), not -2`,
		},
		{
			name: "burst without rate",
			src:  srv + "[limits]\nrate_burst = 5\n",
			want: `mcpmux.toml:4: [limits] rate_burst: has no effect without rate_limit`,
		},
		{
			name: "unknown limit",
			src:  srv + "[limits]\nmax_sesions = 5\n",
			want: `mcpmux.toml:4: [limits] max_sesions: unknown key (did you mean max_sessions?)`,
		},
		{
			name: "server in-flight zero",
			src:  srv + "max_in_flight = 0\n",
			want: `mcpmux.toml:3: [servers.a] max_in_flight: must be positive, not 0`,
		},
		{
			name: "bad user",
			src:  srv + "user = \"no body\"\n",
			want: `mcpmux.toml:3: [servers.a] user: invalid user "no body": give a name or a numeric id`,
		},
		{
			name: "user on a remote server",
			src:  "[servers.a]\nurl = \"http://127.0.0.1:1/mcp\"\ngroup = \"staff\"\n",
			want: `mcpmux.toml:3: [servers.a] group: not allowed with url: only for a server with command`,
		},
		{
			name: "trusted header with tokens",
			src: "[upstream]\ntrusted_header = \"X-User\"\n[[upstream.tokens]]\nidentity = \"a\"\n" +
				"sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] trusted_header: is configured together with tokens or jwt: a request without a bearer token would be taken at the header's word. Use one, or set trusted_header_with_tokens = true to accept both (a request with an Authorization header is then judged by it alone)`,
		},
		{
			name: "trusted_header_with_tokens alone",
			src:  "[upstream]\ntrusted_header_with_tokens = true\n" + srv,
			want: `mcpmux.toml:2: [upstream] trusted_header_with_tokens: has no effect without trusted_header`,
		},
	})
}

func TestLimitsDefaultsAndBurst(t *testing.T) {
	cfg := mustParse(t, srv+"[limits]\nrate_limit = 2.5\nmax_in_flight = 5\n", nil)
	if cfg.Limits.RateBurst != 3 {
		t.Errorf("RateBurst = %d, want ceil(2.5) = 3", cfg.Limits.RateBurst)
	}
	if s := cfg.Servers[0]; s.MaxInFlight != 5 || s.MaxQueued != DefaultMaxQueued {
		t.Errorf("server limits = %d/%d, want the [limits] values 5/%d", s.MaxInFlight, s.MaxQueued, DefaultMaxQueued)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "512B": 512, "4KiB": 4096, "16MiB": 16 << 20, "2 GiB": 2 << 30} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
		if in != "0" && FormatSize(want) == "" {
			t.Errorf("FormatSize(%d) is empty", want)
		}
	}
	for _, in := range []string{"", "-1", "1.5MiB", "1mb", "MiB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
	if got := FormatSize(3 << 20); got != "3MiB" {
		t.Errorf("FormatSize(3MiB) = %q", got)
	}
}

func TestInspect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcpmux.toml")
	src := "[mux]\npolicy_dir = \"pol\"\nlog_level = \"loud\"\n[servers.a]\ncommand = \"x\"\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Inspect(path)
	var es Errors
	if !errors.As(err, &es) || len(es) != 1 || es[0].Line != 3 {
		t.Fatalf("Inspect error = %v, want one problem at line 3", err)
	}
	if cfg == nil || cfg.Mux.PolicyDir != filepath.Join(filepath.Dir(path), "pol") || len(cfg.Servers) != 1 {
		t.Fatalf("Inspect config = %+v, want the decoded policy_dir and server", cfg)
	}
	if cfg, err := Load(path); cfg != nil || err == nil {
		t.Errorf("Load = %v, %v; want no config and the error", cfg, err)
	}
	if err := os.WriteFile(path, []byte("[mux\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err := Inspect(path); cfg != nil || err == nil {
		t.Errorf("Inspect(invalid TOML) = %v, %v; want no config", cfg, err)
	}
}
