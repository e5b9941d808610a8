package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// srv is a valid server, appended to sources whose subject is elsewhere.
const srv = "[servers.a]\ncommand = \"x\"\n"

// file is the name sources are parsed under; absolute so that resolved
// paths are predictable.
const file = "/etc/mcpmux/mcpmux.toml"

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func mustParse(t *testing.T, src string, vars map[string]string) *Config {
	t.Helper()
	cfg, err := Parse(file, []byte(src), env(vars))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	return cfg
}

func TestExample(t *testing.T) {
	cfg, err := Load("../config.example.toml")
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		File: filepath.Join(root, "config.example.toml"),
		Mux: Mux{
			Separator:     "__",
			PolicyDir:     filepath.Join(root, "examples", "policies"),
			MaxNameLength: 48,
			CallTimeout:   60 * time.Second,
			LogLevel:      "info",
			LogFormat:     "json",
			PageSize:      0,
			Catalog:       CatalogFull,
			SearchAbove:   DefaultSearchAbove,
			Pinning:       "warn",
			PinFile:       filepath.Join(root, "mcpmux.lock"),
			PinNew:        "",
		},
		Upstream: Upstream{
			Identity:           "reader",
			Path:               "/mcp",
			SessionIdleTimeout: 30 * time.Minute,
			DrainTimeout:       30 * time.Second,
		},
		Limits: defaultLimits(),
		Servers: []Server{
			{
				Alias:            "docs",
				Command:          filepath.Join(root, ".bin", "labserver"),
				Env:              map[string]string{"LAB_SOURCE": "docs"},
				Hide:             []string{"crash_for_test", "spawn_grandchild", "notify_changed"},
				ReadOnly:         []string{"search"},
				TrustAnnotations: true, Prefix: true,
				StartupTimeout: 10 * time.Second,
				Required:       true,
				MaxInFlight:    DefaultMaxInFlight,
				MaxQueued:      DefaultMaxQueued,
				Replace:        "start-first",
			},
			{
				Alias:            "tickets",
				Command:          filepath.Join(root, ".bin", "labserver"),
				Env:              map[string]string{"LAB_SOURCE": "tickets"},
				Hide:             []string{"crash_for_test", "spawn_grandchild", "notify_changed"},
				ReadOnly:         []string{"search"},
				TrustAnnotations: true, Prefix: true,
				StartupTimeout: 10 * time.Second,
				Required:       true,
				MaxInFlight:    DefaultMaxInFlight,
				MaxQueued:      DefaultMaxQueued,
				Replace:        "start-first",
			},
		},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load = %+v\nwant %+v", cfg, want)
	}
	for _, id := range []string{"reader", "admin"} {
		if _, err := os.Stat(filepath.Join(cfg.Mux.PolicyDir, id+".toml")); err != nil {
			t.Errorf("example policy: %v", err)
		}
	}
}

// TestExampleDocumentsEveryKey checks that config.example.toml mentions
// every key the decoder understands, so the documentation keeps up.
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{
		"[mux]", "separator", "policy_dir", "max_name_length", "call_timeout",
		"log_level", "log_format", "page_size", "catalog", "search_above",
		"[upstream]", "identity", "listen", "path", "admin_listen", "debug_listen",
		"allow_unauthenticated", "trusted_header", "trusted_header_with_tokens",
		"session_idle_timeout", "drain_timeout", "drain_delay",
		"[limits]", "max_message_bytes", "max_body_bytes", "max_header_bytes",
		"read_header_timeout", "read_timeout", "write_timeout", "idle_timeout",
		"max_sessions", "max_sessions_per_identity", "max_catalog_pages",
		"max_catalog_bytes", "max_schema_bytes", "max_schema_depth",
		"max_in_flight", "max_queued", "rate_limit", "rate_burst", "user", "group",
		"[[upstream.tokens]]", "sha256", "env",
		"[upstream.jwt]", "issuer", "audience", "jwks_file", "identity_claim",
		"authorization_servers",
		"[servers.", "command", "args", "env", "inherit_env", "url", "headers",
		"transport", "ping_interval", "hide", "read_only", "trust_annotations",
		"startup_timeout", "required",
	}
	for _, k := range keys {
		if !strings.Contains(string(data), k) {
			t.Errorf("config.example.toml does not mention %s", k)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.toml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want an os.ErrNotExist", err)
	}
}

func TestDefaults(t *testing.T) {
	cfg := mustParse(t, srv, nil)
	want := &Config{
		File: file,
		Mux: Mux{
			Separator:     "__",
			PolicyDir:     "/etc/mcpmux/policies",
			MaxNameLength: 48,
			CallTimeout:   60 * time.Second,
			LogLevel:      "info",
			LogFormat:     "json",
			PageSize:      0,
			Catalog:       CatalogFull,
			SearchAbove:   DefaultSearchAbove,
			Pinning:       "warn",
			PinFile:       "/etc/mcpmux/mcpmux.lock",
			PinNew:        "",
		},
		Upstream: Upstream{
			Path:               "/mcp",
			SessionIdleTimeout: 30 * time.Minute,
			DrainTimeout:       30 * time.Second,
		},
		Limits: defaultLimits(),
		Servers: []Server{{
			Alias:            "a",
			Command:          "x",
			TrustAnnotations: true, Prefix: true,
			StartupTimeout: 10 * time.Second,
			Required:       true,
			MaxInFlight:    DefaultMaxInFlight,
			MaxQueued:      DefaultMaxQueued,
			Replace:        "start-first",
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Parse = %+v\nwant %+v", cfg, want)
	}
}

func TestEveryKey(t *testing.T) {
	cfg := mustParse(t, `
[mux]
separator = "_"
policy_dir = "/srv/policies/"
max_name_length = 64
call_timeout = "1m30s"
log_level = "debug"
log_format = "console"
page_size = 50
catalog = "auto"
search_above = 100
pinning = "enforce"
pin_file = "pins/tools.lock"
pin_new = "hold"

[upstream]
identity = "ops.team-1_x"
listen = "0.0.0.0:7300"
path = "/api/mcp"
admin_listen = "127.0.0.1:7301"
allow_unauthenticated = true
trusted_header = "X-Forwarded-User"
trusted_header_with_tokens = true
session_idle_timeout = "5m"
drain_timeout = "0s"

[[upstream.tokens]]
identity = "agent"
sha256 = "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"

[[upstream.tokens]]
identity = "ops"
env = "OPS_TOKEN"

[upstream.jwt]
issuer = "https://auth.example.com"
audience = "https://mcpmux.example.com/mcp"
jwks_file = "/var/lib/mcpmux/jwks.json"
identity_claim = "email"
authorization_servers = ["https://a.example.com", "https://b.example.com"]

[servers.my-docs]
command = "/usr/bin/docs"
args = ["--stdio", "-v"]
env = { A = "1", B = "x${HOME}y" }
inherit_env = ["AWS_PROFILE"]
hide = ["debug_*", "x?"]
read_only = ["get_*"]
trust_annotations = false
prefix = false
roots = ["file:///data", "file:///srv/a%20b"]
startup_timeout = "250ms"
required = false
max_in_flight = 3
max_queued = 30
replace = "stop-first"
user = "nobody"
group = "65534"

[servers.search]
url = "https://search.example.com:8443/mcp?v=2"
headers = { Authorization = "Bearer ${SEARCH_TOKEN}", X-Trace = "on" }
transport = "sse"
ping_interval = "1m"
hide = ["admin_*"]
read_only = ["find"]
trust_annotations = false
startup_timeout = "3s"
required = false

[limits]
max_message_bytes = "1MiB"
max_body_bytes = 65536
max_header_bytes = "8KiB"
read_header_timeout = "2s"
read_timeout = "3s"
write_timeout = "4s"
idle_timeout = "5s"
max_sessions = 50
max_sessions_per_identity = 5
max_catalog_pages = 7
max_catalog_bytes = "2MiB"
max_schema_bytes = "100KiB"
max_schema_depth = 9
max_in_flight = 8
max_queued = 0
rate_limit = 2.5
rate_burst = 10
`, map[string]string{"HOME": "/home/u", "OPS_TOKEN": "ops-s3cret", "SEARCH_TOKEN": "t0k"})
	want := &Config{
		File: file,
		Mux: Mux{
			Separator:     "_",
			PolicyDir:     "/srv/policies",
			MaxNameLength: 64,
			CallTimeout:   90 * time.Second,
			LogLevel:      "debug",
			LogFormat:     "console",
			PageSize:      50,
			Catalog:       CatalogAuto,
			SearchAbove:   100,
			Pinning:       "enforce",
			PinFile:       "/etc/mcpmux/pins/tools.lock",
			PinNew:        "hold",
		},
		Upstream: Upstream{
			Identity:             "ops.team-1_x",
			Listen:               "0.0.0.0:7300",
			Path:                 "/api/mcp",
			AdminListen:          "127.0.0.1:7301",
			AllowUnauthenticated: true,
			Tokens: []Token{
				{Identity: "agent", SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Line: 27},
				{Identity: "ops", Env: "OPS_TOKEN", Value: "ops-s3cret", Line: 31},
			},
			JWT: &JWT{
				Issuer:               "https://auth.example.com",
				Audience:             "https://mcpmux.example.com/mcp",
				JWKSFile:             "/var/lib/mcpmux/jwks.json",
				IdentityClaim:        "email",
				AuthorizationServers: []string{"https://a.example.com", "https://b.example.com"},
			},
			TrustedHeader:           "X-Forwarded-User",
			TrustedHeaderWithTokens: true,
			SessionIdleTimeout:      5 * time.Minute,
			DrainTimeout:            0,
		},
		Limits: Limits{
			MaxMessageBytes:        1 << 20,
			MaxBodyBytes:           65536,
			MaxHeaderBytes:         8 << 10,
			ReadHeaderTimeout:      2 * time.Second,
			ReadTimeout:            3 * time.Second,
			WriteTimeout:           4 * time.Second,
			IdleTimeout:            5 * time.Second,
			MaxSessions:            50,
			MaxSessionsPerIdentity: 5,
			MaxCatalogPages:        7,
			MaxCatalogBytes:        2 << 20,
			MaxSchemaBytes:         100 << 10,
			MaxSchemaDepth:         9,
			MaxInFlight:            8,
			MaxQueued:              0,
			RateLimit:              2.5,
			RateBurst:              10,
		},
		Servers: []Server{{
			Alias:            "my-docs",
			Command:          "/usr/bin/docs",
			Args:             []string{"--stdio", "-v"},
			Env:              map[string]string{"A": "1", "B": "x/home/uy"},
			InheritEnv:       []string{"AWS_PROFILE"},
			Hide:             []string{"debug_*", "x?"},
			ReadOnly:         []string{"get_*"},
			TrustAnnotations: false,
			Roots:            []string{"file:///data", "file:///srv/a%20b"},
			StartupTimeout:   250 * time.Millisecond,
			Required:         false,
			MaxInFlight:      3,
			MaxQueued:        30,
			Replace:          "stop-first",
			User:             "nobody",
			Group:            "65534",
		}, {
			Alias:            "search",
			URL:              "https://search.example.com:8443/mcp?v=2",
			Headers:          map[string]string{"Authorization": "Bearer t0k", "X-Trace": "on"},
			Transport:        "sse",
			PingInterval:     time.Minute,
			Hide:             []string{"admin_*"},
			ReadOnly:         []string{"find"},
			TrustAnnotations: false,
			Prefix:           true,
			StartupTimeout:   3 * time.Second,
			Required:         false,
			MaxInFlight:      8,
			MaxQueued:        0,
			Replace:          "start-first",
		}},
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Parse = %+v\nwant %+v", cfg, want)
	}
}

func TestServerOrder(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"tables", `
[servers.zeta]
command = "z"
[servers.alpha]
command = "a"
[servers.mid]
command = "m"
`, []string{"zeta", "alpha", "mid"}},
		{"one inline table", `
servers = { zeta = { command = "z" }, alpha = { command = "a" } }
`, []string{"zeta", "alpha"}},
		{"dotted keys", `
servers.zeta.command = "z"
servers.alpha.command = "a"
`, []string{"zeta", "alpha"}},
		{"sub-table first", `
[servers.zeta.env]
A = "1"
[servers.alpha]
command = "a"
[servers.zeta]
command = "z"
`, []string{"zeta", "alpha"}},
		{"under [servers]", `
[servers]
zeta = { command = "z" }
alpha = { command = "a" }
`, []string{"zeta", "alpha"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.src, nil)
			var got []string
			for _, s := range cfg.Servers {
				got = append(got, s.Alias)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("servers in order %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	tests := []struct {
		file, command, policyDir string
		wantCommand, wantDir     string
	}{
		{"/etc/mcpmux/mcpmux.toml", "bin/srv", "pol", "/etc/mcpmux/bin/srv", "/etc/mcpmux/pol"},
		{"/etc/mcpmux/mcpmux.toml", "./srv", "./pol/", "/etc/mcpmux/srv", "/etc/mcpmux/pol"},
		{"/etc/mcpmux/mcpmux.toml", "../bin/srv", "../pol", "/etc/bin/srv", "/etc/pol"},
		{"/etc/mcpmux/mcpmux.toml", "/usr/bin/srv", "/var/pol", "/usr/bin/srv", "/var/pol"},
		{"/etc/mcpmux/mcpmux.toml", "srv", "pol", "srv", "/etc/mcpmux/pol"}, // bare: PATH
	}
	for _, tt := range tests {
		src := "[mux]\npolicy_dir = \"" + tt.policyDir + "\"\n[servers.a]\ncommand = \"" + tt.command + "\"\n"
		cfg, err := Parse(tt.file, []byte(src), nil)
		if err != nil {
			t.Errorf("%s: %v", tt.command, err)
			continue
		}
		if got := cfg.Servers[0].Command; got != tt.wantCommand {
			t.Errorf("command %q: got %q, want %q", tt.command, got, tt.wantCommand)
		}
		if got := cfg.Mux.PolicyDir; got != tt.wantDir {
			t.Errorf("policy_dir %q: got %q, want %q", tt.policyDir, got, tt.wantDir)
		}
	}

	// A relative file name is resolved against the working directory.
	cfg, err := Parse("conf/mcpmux.toml", []byte(srv), nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "conf", "mcpmux.toml"); cfg.File != want {
		t.Errorf("File = %q, want %q", cfg.File, want)
	}
	if want := filepath.Join(wd, "conf", "policies"); cfg.Mux.PolicyDir != want {
		t.Errorf("PolicyDir = %q, want %q", cfg.Mux.PolicyDir, want)
	}
}

func TestEnvExpansion(t *testing.T) {
	vars := map[string]string{"TOKEN": "s3cret", "EMPTY": "", "DOLLAR": "$x"}
	tests := []struct{ value, want string }{
		{"plain", "plain"},
		{"${TOKEN}", "s3cret"},
		{"Bearer ${TOKEN}!", "Bearer s3cret!"},
		{"${TOKEN}${TOKEN}", "s3crets3cret"},
		{"a${EMPTY}b", "ab"},
		{"$$", "$"},
		{"$${TOKEN}", "${TOKEN}"},
		{"cost: $$5", "cost: $5"},
		{"${DOLLAR}", "$x"}, // values are not expanded again
		{"", ""},
	}
	for _, tt := range tests {
		src := "[servers.a]\ncommand = \"x\"\nenv = { V = '" + tt.value + "' }\n"
		cfg, err := Parse(file, []byte(src), env(vars))
		if err != nil {
			t.Errorf("%q: %v", tt.value, err)
			continue
		}
		if got := cfg.Servers[0].Env["V"]; got != tt.want {
			t.Errorf("%q expanded to %q, want %q", tt.value, got, tt.want)
		}
	}
}

// TestErrors checks the exact text of every error Parse reports.
func TestErrors(t *testing.T) {
	tests := []errorTest{
		// TOML itself.
		{
			name: "syntax error",
			src:  "[mux]\nseparator = \"_\"\nlog_level = \n" + srv,
			want: "mcpmux.toml:3: invalid TOML: unexpected character U+000A at start of value",
		},
		{
			name: "unterminated string",
			src:  srv + "args = [\"a\n",
			want: "mcpmux.toml:3: invalid TOML: ",
		},
		{
			name: "duplicate key",
			src:  srv + "command = \"y\"\n",
			want: "mcpmux.toml:3: invalid TOML: ",
		},
		{
			name: "duplicate server",
			src:  srv + srv,
			want: "mcpmux.toml:3: invalid TOML: ",
		},

		// Unknown keys.
		{
			name: "unknown top-level key",
			src:  "version = 2\n" + srv,
			want: "mcpmux.toml:1: version: unknown key",
		},
		{
			name: "unknown top-level table",
			src:  "[muxx]\nseparator = \"_\"\n" + srv,
			want: "mcpmux.toml:1: muxx: unknown key (did you mean mux?)",
		},
		{
			name: "unknown key in mux",
			src:  "[mux]\nseperator = \"_\"\n" + srv,
			want: "mcpmux.toml:2: [mux] seperator: unknown key (did you mean separator?)",
		},
		{
			name: "unknown key in upstream",
			src:  "[upstream]\nname = \"x\"\n" + srv,
			want: "mcpmux.toml:2: [upstream] name: unknown key",
		},
		{
			name: "unknown key in server",
			src:  srv + "agrs = [\"-v\"]\n",
			want: "mcpmux.toml:3: [servers.a] agrs: unknown key (did you mean args?)",
		},
		{
			name: "unknown key in inline server",
			src:  "[servers]\na = { command = \"x\", timeout = \"1s\" }\n",
			want: "mcpmux.toml:2: [servers.a] timeout: unknown key",
		},
		{
			name: "unknown dotted key",
			src:  srv + "startup.timeout = \"1s\"\n",
			want: "mcpmux.toml:3: [servers.a] startup: unknown key",
		},

		// [mux] values.
		{
			name: "separator",
			src:  "[mux]\nseparator = \"-\"\n" + srv,
			want: `mcpmux.toml:2: [mux] separator: must be "_" or "__", not "-"`,
		},
		{
			name: "separator type",
			src:  "[mux]\nseparator = 1\n" + srv,
			want: `mcpmux.toml:2: [mux] separator: must be a string, not an integer`,
		},
		{
			name: "empty policy_dir",
			src:  "[mux]\npolicy_dir = \"\"\n" + srv,
			want: `mcpmux.toml:2: [mux] policy_dir: must not be empty`,
		},
		{
			name: "max_name_length too small",
			src:  "[mux]\nmax_name_length = 7\n" + srv,
			want: `mcpmux.toml:2: [mux] max_name_length: must be between 8 and 128, not 7`,
		},
		{
			name: "max_name_length too large",
			src:  "[mux]\nmax_name_length = 129\n" + srv,
			want: `mcpmux.toml:2: [mux] max_name_length: must be between 8 and 128, not 129`,
		},
		{
			name: "max_name_length float",
			src:  "[mux]\nmax_name_length = 48.0\n" + srv,
			want: `mcpmux.toml:2: [mux] max_name_length: must be an integer, not a float`,
		},
		{
			name: "call_timeout unparsable",
			src:  "[mux]\ncall_timeout = \"60\"\n" + srv,
			want: `mcpmux.toml:2: [mux] call_timeout: invalid duration "60": use a number and a unit, such as "30s" or "2m"`,
		},
		{
			name: "call_timeout integer",
			src:  "[mux]\ncall_timeout = 60\n" + srv,
			want: `mcpmux.toml:2: [mux] call_timeout: must be a duration string such as "30s" or "2m", not an integer`,
		},
		{
			name: "call_timeout zero",
			src:  "[mux]\ncall_timeout = \"0s\"\n" + srv,
			want: `mcpmux.toml:2: [mux] call_timeout: must be positive, not "0s"`,
		},
		{
			name: "call_timeout negative",
			src:  "[mux]\ncall_timeout = \"-1s\"\n" + srv,
			want: `mcpmux.toml:2: [mux] call_timeout: must be positive, not "-1s"`,
		},
		{
			name: "log_level",
			src:  "[mux]\nlog_level = \"INFO\"\n" + srv,
			want: `mcpmux.toml:2: [mux] log_level: must be one of trace, debug, info, warn, error, fatal, panic, disabled, not "INFO"`,
		},
		{
			name: "log_format",
			src:  "[mux]\nlog_format = \"text\"\n" + srv,
			want: `mcpmux.toml:2: [mux] log_format: must be one of json, console, not "text"`,
		},
		{
			name: "catalog",
			src:  "[mux]\ncatalog = \"some\"\n" + srv,
			want: `mcpmux.toml:2: [mux] catalog: must be one of full, search, auto, not "some"`,
		},
		{
			name: "reserved alias",
			src:  "[servers.mcpmux]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: [servers.mcpmux]: alias "mcpmux" is mcpmux's own (its find_tools and call_tool): give the server another`,
		},
		{
			name: "page_size",
			src:  "[mux]\npage_size = -1\n" + srv,
			want: `mcpmux.toml:2: [mux] page_size: must not be negative, not -1`,
		},
		{
			name: "mux not a table",
			src:  "mux = \"x\"\n" + srv,
			want: `mcpmux.toml:1: mux: must be a table, not a string`,
		},

		// [upstream] values.
		{
			name: "identity",
			src:  "[upstream]\nidentity = \"-x\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] identity: invalid identity "-x": use letters, digits, '.', '_' and '-', starting with a letter or digit`,
		},
		{
			name: "identity with slash",
			src:  "[upstream]\nidentity = \"a/b\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] identity: invalid identity "a/b": use letters, digits, '.', '_' and '-', starting with a letter or digit`,
		},
		{
			name: "empty identity",
			src:  "[upstream]\nidentity = \"\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] identity: must not be empty (leave the key out to configure no identity)`,
		},

		// [servers].
		{
			name: "no servers",
			src:  "[mux]\nseparator = \"_\"\n",
			want: `mcpmux.toml:1: no servers configured: add at least one [servers.ALIAS] table`,
		},
		{
			name: "empty file",
			src:  "",
			want: `mcpmux.toml:1: no servers configured: add at least one [servers.ALIAS] table`,
		},
		{
			name: "empty servers",
			src:  "[mux]\n[servers]\n",
			want: `mcpmux.toml:2: servers: no servers configured: add at least one [servers.ALIAS] table`,
		},
		{
			name: "servers not a table",
			src:  "servers = [\"a\"]\n",
			want: `mcpmux.toml:1: servers: must be a table, not an array`,
		},
		{
			name: "array of servers",
			src:  "[[servers]]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: servers: must be a table, not an array`,
		},
		{
			name: "server not a table",
			src:  "[servers]\na = \"x\"\n",
			want: `mcpmux.toml:2: [servers] a: must be a table, not a string`,
		},
		{
			name: "root not a file URI",
			src:  "[servers.docs]\ncommand = \"x\"\nroots = [\"file:///ok\", \"https://x/y\", \"data\"]\n",
			want: `mcpmux.toml:3: [servers.docs] roots[1]: invalid root "https://x/y": give an absolute file URI, such as "file:///data"` + "\n" +
				`mcpmux.toml:3: [servers.docs] roots[2]: invalid root "data": give an absolute file URI, such as "file:///data"`,
		},
		{
			name: "prefix not a boolean",
			src:  "[servers.docs]\ncommand = \"x\"\nprefix = \"no\"\n",
			want: `mcpmux.toml:3: [servers.docs] prefix: must be a boolean (true or false), not a string`,
		},
		{
			name: "alias with underscore",
			src:  "[servers.my_docs]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: [servers.my_docs]: invalid alias "my_docs": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters`,
		},
		{
			name: "alias upper case",
			src:  "[servers.Docs]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: [servers.Docs]: invalid alias "Docs": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters`,
		},
		{
			name: "alias edge dash",
			src:  "[servers.-docs]\ncommand = \"x\"\n[servers.docs-]\ncommand = \"x\"\n[servers.a--b]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: [servers.-docs]: invalid alias "-docs": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters` + "\n" +
				`mcpmux.toml:3: [servers.docs-]: invalid alias "docs-": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters` + "\n" +
				`mcpmux.toml:5: [servers.a--b]: invalid alias "a--b": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters`,
		},
		{
			name: "alias quoted",
			src:  "[servers.\"my docs\"]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: [servers."my docs"]: invalid alias "my docs": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters`,
		},
		{
			name: "alias too long",
			src:  "[servers." + strings.Repeat("a", 33) + "]\ncommand = \"x\"\n",
			want: `mcpmux.toml:1: [servers.` + strings.Repeat("a", 33) + `]: invalid alias "` + strings.Repeat("a", 33) +
				`": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters`,
		},
		{
			name: "alias leaves no room",
			src:  "[mux]\nmax_name_length = 16\n[servers.abcdef]\ncommand = \"x\"\n[servers.abcd]\ncommand = \"x\"\n",
			want: `mcpmux.toml:3: [servers.abcdef]: alias is too long for max_name_length 16: "abcdef__" leaves no room for a tool name`,
		},
		{
			name: "missing command",
			src:  "[servers.a]\nargs = []\n",
			want: `mcpmux.toml:1: [servers.a]: command or url is required: command to start a server, url to reach a remote one`,
		},
		{
			name: "empty command",
			src:  "[servers.a]\ncommand = \"\"\n",
			want: `mcpmux.toml:2: [servers.a] command: must not be empty`,
		},
		{
			name: "command array",
			src:  "[servers.a]\ncommand = [\"x\", \"-v\"]\n",
			want: `mcpmux.toml:2: [servers.a] command: must be a string, not an array`,
		},
		{
			name: "args not array",
			src:  srv + "args = \"-v\"\n",
			want: `mcpmux.toml:3: [servers.a] args: must be an array of strings, not a string`,
		},
		{
			name: "args element",
			src:  srv + "args = [\n  \"-v\",\n  2,\n]\n",
			want: `mcpmux.toml:5: [servers.a] args[1]: must be a string, not an integer`,
		},
		{
			name: "env not a table",
			src:  srv + "env = [\"A=1\"]\n",
			want: `mcpmux.toml:3: [servers.a] env: must be a table, not an array`,
		},
		{
			name: "env value type",
			src:  srv + "[servers.a.env]\nA = \"1\"\nB = 2\n",
			want: `mcpmux.toml:5: [servers.a] env.B: must be a string, not an integer`,
		},
		{
			name: "env name",
			src:  srv + "env = { \"A.B\" = \"1\", A-C = \"2\" }\n",
			want: `mcpmux.toml:3: [servers.a] env."A.B": invalid variable name` + "\n" +
				`mcpmux.toml:3: [servers.a] env.A-C: invalid variable name`,
		},
		{
			name: "unset variable",
			src:  srv + "env = { TOKEN = \"${DOCS_TOKEN}\" }\n",
			want: `mcpmux.toml:3: [servers.a] env.TOKEN: environment variable DOCS_TOKEN is not set`,
		},
		{
			name: "two unset variables",
			src:  srv + "env = { URL = \"${HOST}:${PORT}\" }\n",
			want: `mcpmux.toml:3: [servers.a] env.URL: environment variable HOST is not set` + "\n" +
				`mcpmux.toml:3: [servers.a] env.URL: environment variable PORT is not set`,
		},
		{
			name: "bare dollar",
			src:  srv + "env = { H = \"$HOME\" }\n",
			vars: map[string]string{"HOME": "/root"},
			want: `mcpmux.toml:3: [servers.a] env.H: "$" must start ${NAME} or be doubled ("$$" for a literal "$")`,
		},
		{
			name: "unterminated reference",
			src:  srv + "env = { H = \"${HOME\" }\n",
			want: `mcpmux.toml:3: [servers.a] env.H: unterminated "${HOME": write ${NAME}`,
		},
		{
			name: "bad reference name",
			src:  srv + "env = { H = \"${}${1X}\" }\n",
			want: `mcpmux.toml:3: [servers.a] env.H: invalid variable name "" in ${}` + "\n" +
				`mcpmux.toml:3: [servers.a] env.H: invalid variable name "1X" in ${1X}`,
		},
		{
			name: "inherit_env name",
			src:  srv + "inherit_env = [\"AWS_PROFILE\", \"A=B\"]\n",
			want: `mcpmux.toml:3: [servers.a] inherit_env[1]: invalid variable name "A=B"`,
		},
		{
			name: "empty pattern",
			src:  srv + "hide = [\n  \"x\",\n  \"\",\n]\nread_only = [\"\"]\n",
			want: `mcpmux.toml:5: [servers.a] hide[1]: invalid pattern "": bad pattern: empty pattern` + "\n" +
				`mcpmux.toml:7: [servers.a] read_only[0]: invalid pattern "": bad pattern: empty pattern`,
		},
		{
			name: "trust_annotations",
			src:  srv + "trust_annotations = \"yes\"\n",
			want: `mcpmux.toml:3: [servers.a] trust_annotations: must be a boolean (true or false), not a string`,
		},
		{
			name: "startup_timeout",
			src:  srv + "startup_timeout = \"soon\"\n",
			want: `mcpmux.toml:3: [servers.a] startup_timeout: invalid duration "soon": use a number and a unit, such as "30s" or "2m"`,
		},
		{
			name: "date value",
			src:  srv + "startup_timeout = 2024-01-01\n",
			want: `mcpmux.toml:3: [servers.a] startup_timeout: must be a duration string such as "30s" or "2m", not a date`,
		},

		// Everything at once, in line order.
		{
			name: "many problems",
			src: `[mux]
separator = "."
log_level = "loud"
colour = true

[upstream]
listen = "8080"

[servers.Bad_Alias]
args = [1]

[servers.ok]
command = "x"
startup_timeout = "0s"
env = { T = "${NOPE}" }
`,
			want: `mcpmux.toml:2: [mux] separator: must be "_" or "__", not "."
mcpmux.toml:3: [mux] log_level: must be one of trace, debug, info, warn, error, fatal, panic, disabled, not "loud"
mcpmux.toml:4: [mux] colour: unknown key
mcpmux.toml:7: [upstream] listen: invalid address "8080": use host:port, such as "127.0.0.1:7300", "[::1]:7300" or ":7300" (every interface)
mcpmux.toml:9: [servers.Bad_Alias]: invalid alias "Bad_Alias": use lower-case letters, digits and inner '-' (no '_'), at most 32 characters
mcpmux.toml:9: [servers.Bad_Alias]: command or url is required: command to start a server, url to reach a remote one
mcpmux.toml:10: [servers.Bad_Alias] args[0]: must be a string, not an integer
mcpmux.toml:14: [servers.ok] startup_timeout: must be positive, not "0s"
mcpmux.toml:15: [servers.ok] env.T: environment variable NOPE is not set`,
		},
	}
	checkErrors(t, tests)
}

// errorTest is a source Parse must refuse with exactly the errors want.
type errorTest struct {
	name string
	src  string
	vars map[string]string
	want string // Error() of the whole result
}

func checkErrors(t *testing.T, tests []errorTest) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("mcpmux.toml", []byte(tt.src), env(tt.vars))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Parse returned a config with an error")
			}
			got := err.Error()
			if strings.HasSuffix(tt.want, "invalid TOML: ") {
				// go-toml's wording is its own; only the location is ours.
				if !strings.HasPrefix(got, tt.want) || strings.Contains(got, "\n") {
					t.Errorf("error:\n%s\nwant one line starting with:\n%s", got, tt.want)
				}
				return
			}
			if got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestErrorTypes(t *testing.T) {
	_, err := Parse("m.toml", []byte("[mux]\nlog_level = 1\nbogus = 2\n"+srv), nil)
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T is not an Errors", err)
	}
	want := Errors{
		{File: "m.toml", Line: 2, Msg: "[mux] log_level: must be a string, not an integer"},
		{File: "m.toml", Line: 3, Msg: "[mux] bogus: unknown key"},
	}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("errors = %v, want %v", errs, want)
	}
	var one *Error
	if !errors.As(err, &one) || one.Line != 2 {
		t.Errorf("errors.As(*Error) = %v, want the first problem", one)
	}
}

func TestCRLF(t *testing.T) {
	src := strings.ReplaceAll("[mux]\r\nseparator = \"-\"\r\n"+srv, "\n", "\r\n")
	src = strings.ReplaceAll(src, "\r\r\n", "\r\n")
	_, err := Parse("m.toml", []byte(src), nil)
	want := `m.toml:2: [mux] separator: must be "_" or "__", not "-"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestValidIdentity(t *testing.T) {
	for _, id := range []string{"reader", "a", "0", "ops.team-1_x", "A.B"} {
		if !ValidIdentity(id) {
			t.Errorf("ValidIdentity(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", "-a", ".a", "_a", "a/b", "a b", "é"} {
		if ValidIdentity(id) {
			t.Errorf("ValidIdentity(%q) = true, want false", id)
		}
	}
}

// FuzzParse checks that Parse never panics, and that every error it
// reports is one line naming the file and a line within the document.
func FuzzParse(f *testing.F) {
	f.Add([]byte(srv))
	f.Add([]byte("[mux]\nseparator = 1\n[servers.a]\nenv = { A = \"${B}\" }\nhide = [\"\", [1]]\n"))
	f.Add([]byte("servers = { a = { command = \"x\", args = [[1], {b = 2}] } }\n"))
	f.Add([]byte("[[servers.a]]\ncommand = 'x'\n[[servers.a]]\n"))
	f.Add([]byte("[upstream]\nlisten = ':1'\ntokens = [{identity = 'a', env = 'B'}, {sha256 = 1}]\n" +
		"[[upstream.tokens]]\nidentity = 'b'\n[upstream.tokens.x]\n[upstream.jwt]\nissuer = ''\n" +
		"[servers.a]\nurl = 'http://x'\ncommand = 'y'\nheaders = { A = '${B}', 'b c' = 2 }\n"))
	if data, err := os.ReadFile("../config.example.toml"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.toml", data, env(map[string]string{"B": "b"}))
		if err == nil {
			if len(cfg.Servers) == 0 {
				t.Fatal("a config without servers was accepted")
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error %T %v is not a non-empty Errors", err, err)
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, e := range errs {
			if e.File != "f.toml" || e.Line < 1 || e.Line > lines || strings.Contains(e.Msg, "\n") {
				t.Fatalf("bad error %q (document has %d lines)", e.Error(), lines)
			}
		}
	})
}

// A tool never pinned is held as pin_new says or, with pin_new not set,
// under enforce once pins exist (trust on first use before then).
func TestHoldNew(t *testing.T) {
	cases := []struct {
		pinning, pinNew string
		exist, want     bool
	}{
		{PinningEnforce, PinNewByMode, false, false},
		{PinningEnforce, PinNewByMode, true, true},
		{PinningEnforce, PinNewPin, true, false},
		{PinningEnforce, PinNewHold, false, true},
		{PinningWarn, PinNewByMode, true, false},
		{PinningWarn, PinNewHold, true, true},
	}
	for _, c := range cases {
		m := Mux{Pinning: c.pinning, PinNew: c.pinNew}
		if got := m.HoldNew(c.exist); got != c.want {
			t.Errorf("pinning %q, pin_new %q, pins exist %v: HoldNew = %v, want %v", c.pinning, c.pinNew, c.exist, got, c.want)
		}
	}
}
