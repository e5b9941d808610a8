package config

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const (
	digestA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")
	digestB = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")
)

func TestUpstreamErrors(t *testing.T) {
	// Most sources set allow_unauthenticated, so that a listen beyond
	// loopback is not the problem.
	const up = "[upstream]\nallow_unauthenticated = true\n"
	checkErrors(t, []errorTest{
		// Addresses.
		{
			name: "listen without port",
			src:  up + "listen = \"7300\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: invalid address "7300": use host:port, such as "127.0.0.1:7300", "[::1]:7300" or ":7300" (every interface)`,
		},
		{
			name: "listen IPv6 without brackets",
			src:  up + "listen = \"::1:7300\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: invalid address "::1:7300": use host:port, such as "127.0.0.1:7300", "[::1]:7300" or ":7300" (every interface)`,
		},
		{
			name: "listen port out of range",
			src:  up + "listen = \"127.0.0.1:65536\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: invalid port "65536" in "127.0.0.1:65536": use a number from 0 to 65535`,
		},
		{
			name: "listen empty port",
			src:  up + "listen = \"127.0.0.1:\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: invalid port "" in "127.0.0.1:": use a number from 0 to 65535`,
		},
		{
			name: "listen named port",
			src:  up + "listen = \"localhost:http\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: invalid port "http" in "localhost:http": use a number from 0 to 65535`,
		},
		{
			name: "listen bad host",
			src:  up + "listen = \"my host:80\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: invalid host "my host" in "my host:80": use an IP address or a host name`,
		},
		{
			name: "listen not a string",
			src:  up + "listen = 7300\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: must be a string, not an integer`,
		},
		{
			name: "admin_listen invalid",
			src:  up + "admin_listen = \"localhost\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] admin_listen: invalid address "localhost": use host:port, such as "127.0.0.1:7300", "[::1]:7300" or ":7300" (every interface)`,
		},
		{
			name: "debug_listen beyond loopback",
			src:  up + "debug_listen = \":7302\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] debug_listen: ":7302" is not a loopback address: profiles show mcpmux's memory and code to whoever reaches them; use 127.0.0.1:PORT or [::1]:PORT, and port-forward to reach it from elsewhere`,
		},
		{
			name: "debug_listen same as admin_listen",
			src:  up + "admin_listen = \"127.0.0.1:7301\"\ndebug_listen = \"127.0.0.1:7301\"\n" + srv,
			want: `mcpmux.toml:4: [upstream] debug_listen: must differ from admin_listen ("127.0.0.1:7301")`,
		},
		{
			name: "admin_listen same as listen",
			src:  "[upstream]\nlisten = \"127.0.0.1:7300\"\nadmin_listen = \"127.0.0.1:7300\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] admin_listen: must differ from listen ("127.0.0.1:7300"): set another port, or leave admin_listen out to serve /healthz, /readyz and /metrics on listen`,
		},
		{
			name: "admin_listen on every interface, same port",
			src:  "[upstream]\nlisten = \"localhost:7300\"\nadmin_listen = \":7300\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] admin_listen: must differ from listen ("localhost:7300"): set another port, or leave admin_listen out to serve /healthz, /readyz and /metrics on listen`,
		},

		// Other [upstream] keys.
		{
			name: "path without slash",
			src:  "[upstream]\npath = \"mcp\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] path: must start with "/", not "mcp"`,
		},
		{
			name: "empty path",
			src:  "[upstream]\npath = \"\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] path: must start with "/", not ""`,
		},
		{
			name: "path with query",
			src:  "[upstream]\npath = \"/mcp?x=1\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] path: invalid path "/mcp?x=1": spaces, control characters, '?' and '#' are not allowed`,
		},
		{
			name: "allow_unauthenticated",
			src:  "[upstream]\nallow_unauthenticated = \"yes\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] allow_unauthenticated: must be a boolean (true or false), not a string`,
		},
		{
			name: "trusted_header",
			src:  "[upstream]\ntrusted_header = \"X User:\"\n" + srv,
			want: "mcpmux.toml:2: [upstream] trusted_header: invalid header name \"X User:\": use letters, digits and !#$%&'*+-.^_`|~, such as \"X-Forwarded-User\"",
		},
		{
			name: "session_idle_timeout zero",
			src:  "[upstream]\nsession_idle_timeout = \"0s\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] session_idle_timeout: must be positive, not "0s"`,
		},
		{
			name: "drain_timeout negative",
			src:  "[upstream]\ndrain_timeout = \"-1s\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] drain_timeout: must not be negative, not "-1s"`,
		},
		{
			name: "drain_timeout integer",
			src:  "[upstream]\ndrain_timeout = 30\n" + srv,
			want: `mcpmux.toml:2: [upstream] drain_timeout: must be a duration string such as "30s" or "2m", not an integer`,
		},
		{
			name: "unknown key, suggested",
			src:  "[upstream]\nlisten_addr = \"x\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] listen_addr: unknown key`,
		},
		{
			name: "typo",
			src:  "[upstream]\ntrusted_headr = \"X\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] trusted_headr: unknown key (did you mean trusted_header?)`,
		},

		// Listening beyond loopback without authentication.
		{
			name: "every interface",
			src:  "[upstream]\nidentity = \"reader\"\nlisten = \":7300\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] listen: ":7300" listens on every interface, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, or set allow_unauthenticated = true to let any caller in as [upstream] identity`,
		},
		{
			name: "unspecified address",
			src:  "[upstream]\nlisten = \"0.0.0.0:7300\"\nallow_unauthenticated = false\n" + srv,
			want: `mcpmux.toml:2: [upstream] listen: "0.0.0.0:7300" is not a loopback address, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, or set allow_unauthenticated = true to let any caller in as [upstream] identity`,
		},
		{
			name: "host name",
			src:  "[upstream]\nlisten = \"mcp.example.com:443\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] listen: "mcp.example.com:443" is not a loopback address, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, or set allow_unauthenticated = true to let any caller in as [upstream] identity`,
		},
		{
			name: "empty tokens are no authentication",
			src:  "[upstream]\nlisten = \"[::]:7300\"\ntokens = []\ntrusted_header = \"\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] listen: "[::]:7300" is not a loopback address, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, or set allow_unauthenticated = true to let any caller in as [upstream] identity`,
		},
		{
			// The broken token is the problem, not the missing
			// authentication.
			name: "authentication in error",
			src:  "[upstream]\nlisten = \":7300\"\n[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"abc\"\n" + srv,
			want: `mcpmux.toml:5: [upstream] tokens[0].sha256: must be the SHA-256 digest of the token as 64 hexadecimal digits (not the token itself)`,
		},

		// [[upstream.tokens]].
		{
			name: "tokens not an array",
			src:  "[upstream]\ntokens = { agent = \"x\" }\n" + srv,
			want: `mcpmux.toml:2: [upstream] tokens: must be an array of tables ([[upstream.tokens]]), not a table`,
		},
		{
			name: "token not a table",
			src:  "[upstream]\ntokens = [\n  { identity = \"a\", env = \"T\" },\n  \"secret\",\n]\n" + srv,
			vars: map[string]string{"T": "t"},
			want: `mcpmux.toml:4: [upstream] tokens[1]: must be a table, not a string`,
		},
		{
			name: "token without identity",
			src:  "[upstream]\n\n[[upstream.tokens]]\nsha256 = \"" + digestA + "\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] tokens[0]: identity is required: the identity the token stands for`,
		},
		{
			name: "token identities",
			src: "[[upstream.tokens]]\nidentity = \"a b\"\nsha256 = \"" + digestA + "\"\n" +
				"[[upstream.tokens]]\nidentity = \"\"\nsha256 = \"" + digestB + "\"\n" +
				"[[upstream.tokens]]\nidentity = 1\nenv = \"T\"\n" + srv,
			vars: map[string]string{"T": "t"},
			want: `mcpmux.toml:2: [upstream] tokens[0].identity: invalid identity "a b": use letters, digits, '.', '_' and '-', starting with a letter or digit` + "\n" +
				`mcpmux.toml:5: [upstream] tokens[1].identity: must not be empty` + "\n" +
				`mcpmux.toml:8: [upstream] tokens[2].identity: must be a string, not an integer`,
		},
		{
			name: "token with sha256 and env",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"" + digestA + "\"\nenv = \"T\"\n" + srv,
			vars: map[string]string{"T": "t"},
			want: `mcpmux.toml:1: [upstream] tokens[0]: set either sha256 or env, not both`,
		},
		{
			name: "token with neither",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\n" + srv,
			want: `mcpmux.toml:1: [upstream] tokens[0]: sha256 or env is required: the SHA-256 digest of the token, or the variable holding it`,
		},
		{
			name: "sha256 not hex",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"" + digestA[:63] + "g\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] tokens[0].sha256: must be the SHA-256 digest of the token as 64 hexadecimal digits (not the token itself)`,
		},
		{
			name: "sha256 too long",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"" + digestA + "00\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] tokens[0].sha256: must be the SHA-256 digest of the token as 64 hexadecimal digits (not the token itself)`,
		},
		{
			name: "sha256 not a string",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nsha256 = 1\n" + srv,
			want: `mcpmux.toml:3: [upstream] tokens[0].sha256: must be a string, not an integer`,
		},
		{
			name: "token variable unset",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nenv = \"AGENT_TOKEN\"\n" + srv,
			want: `mcpmux.toml:3: [upstream] tokens[0].env: environment variable AGENT_TOKEN is not set`,
		},
		{
			name: "token variable empty",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nenv = \"AGENT_TOKEN\"\n" + srv,
			vars: map[string]string{"AGENT_TOKEN": ""},
			want: `mcpmux.toml:3: [upstream] tokens[0].env: environment variable AGENT_TOKEN is empty`,
		},
		{
			name: "token variable name",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nenv = \"${AGENT_TOKEN}\"\n" + srv,
			vars: map[string]string{"AGENT_TOKEN": "t"},
			want: `mcpmux.toml:3: [upstream] tokens[0].env: invalid variable name "${AGENT_TOKEN}"`,
		},
		{
			name: "unknown key in token",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nsha265 = \"" + digestA + "\"\n" + srv,
			want: `mcpmux.toml:1: [upstream] tokens[0]: sha256 or env is required: the SHA-256 digest of the token, or the variable holding it` + "\n" +
				`mcpmux.toml:3: [upstream] tokens[0].sha265: unknown key (did you mean sha256?)`,
		},
		{
			name: "sub-table in token",
			src:  "[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"" + digestA + "\"\n[upstream.tokens.scope]\nx = 1\n" + srv,
			want: `mcpmux.toml:4: [upstream] tokens[0].scope: unknown key`,
		},
		{
			name: "same digest twice",
			src: "[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"" + digestA + "\"\n\n" +
				"[[upstream.tokens]]\nidentity = \"b\"\nsha256 = \"" + digestB + "\"\n\n" +
				"[[upstream.tokens]]\nidentity = \"c\"\nsha256 = \"" + strings.ToUpper(digestA) + "\"\n" + srv,
			want: `mcpmux.toml:9: [upstream] tokens[2]: the same token as tokens[0] (line 1): each token stands for one identity`,
		},
		{
			name: "variable holding a token given by digest",
			src: "[upstream]\ntokens = [\n  { identity = \"a\", sha256 = \"" + digestA + "\" },\n" +
				"  { identity = \"b\", env = \"B_TOKEN\" },\n]\n" + srv,
			vars: map[string]string{"B_TOKEN": "test"},
			want: `mcpmux.toml:4: [upstream] tokens[1]: the same token as tokens[0] (line 3): each token stands for one identity`,
		},
		{
			name: "two variables with the same token",
			src: "[[upstream.tokens]]\nidentity = \"a\"\nenv = \"A_TOKEN\"\n" +
				"[[upstream.tokens]]\nidentity = \"a\"\nenv = \"B_TOKEN\"\n" + srv,
			vars: map[string]string{"A_TOKEN": "same", "B_TOKEN": "same"},
			want: `mcpmux.toml:4: [upstream] tokens[1]: the same token as tokens[0] (line 1): each token stands for one identity`,
		},

		// [upstream.jwt].
		{
			name: "jwt not a table",
			src:  "[upstream]\njwt = \"https://auth.example.com\"\n" + srv,
			want: `mcpmux.toml:2: [upstream] jwt: must be a table, not a string`,
		},
		{
			name: "jwt empty",
			src:  "[upstream]\nidentity = \"a\"\n\n[upstream.jwt]\n" + srv,
			want: `mcpmux.toml:4: [upstream.jwt]: issuer is required: the iss of accepted tokens` + "\n" +
				`mcpmux.toml:4: [upstream.jwt]: audience is required: mcpmux's own URL, the aud of accepted tokens` + "\n" +
				`mcpmux.toml:4: [upstream.jwt]: the issuer's public keys are required: set jwks_url (the identity provider's JWKS), discovery = true (find it from issuer's /.well-known/openid-configuration) or jwks_file (a local JWKS)`,
		},
		{
			name: "jwt inline",
			src:  "[upstream]\njwt = { issuer = \"i\", jwks_file = \"k.json\" }\n" + srv,
			want: `mcpmux.toml:2: [upstream.jwt]: audience is required: mcpmux's own URL, the aud of accepted tokens`,
		},
		{
			name: "jwt empty values",
			src: "[upstream.jwt]\nissuer = \"\"\naudience = \"\"\njwks_file = \"\"\nidentity_claim = \"\"\n" +
				"authorization_servers = []\n" + srv,
			want: `mcpmux.toml:2: [upstream.jwt] issuer: must not be empty` + "\n" +
				`mcpmux.toml:3: [upstream.jwt] audience: must not be empty` + "\n" +
				`mcpmux.toml:4: [upstream.jwt] jwks_file: must not be empty` + "\n" +
				`mcpmux.toml:5: [upstream.jwt] identity_claim: must not be empty` + "\n" +
				`mcpmux.toml:6: [upstream.jwt] authorization_servers: must not be empty (leave the key out to advertise issuer)`,
		},
		{
			name: "jwt two key sources",
			src:  "[upstream.jwt]\nissuer = \"https://idp\"\naudience = \"a\"\njwks_file = \"k\"\njwks_url = \"https://idp/keys\"\n" + srv,
			want: `mcpmux.toml:1: [upstream.jwt]: set only one of jwks_file, jwks_url and discovery = true: they are alternative sources of the same keys`,
		},
		{
			name: "jwks_url plain http elsewhere",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_url = \"http://idp.example.com/keys\"\n" + srv,
			want: `mcpmux.toml:4: [upstream.jwt] jwks_url: "http://idp.example.com/keys" is plain HTTP to another machine: keys must come over https (http only to a loopback address, for tests)`,
		},
		{
			name: "jwks_url not a URL",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_url = \"keys.json\"\n" + srv,
			want: `mcpmux.toml:4: [upstream.jwt] jwks_url: "keys.json" is not an absolute URL`,
		},
		{
			name: "discovery needs an https issuer",
			src:  "[upstream.jwt]\nissuer = \"ftp://idp\"\naudience = \"a\"\ndiscovery = true\n" + srv,
			want: `mcpmux.toml:4: [upstream.jwt] discovery: needs an issuer to discover keys from, and issuer "ftp://idp" must be an https URL`,
		},
		{
			name: "stale before refresh",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_url = \"https://idp/k\"\njwks_refresh = \"1h\"\njwks_max_stale = \"30m\"\n" + srv,
			want: `mcpmux.toml:6: [upstream.jwt] jwks_max_stale: (30m0s) must be longer than jwks_refresh (1h0m0s): keys would expire between two fetches even when the provider answers`,
		},
		{
			name: "refresh with a file",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"k\"\njwks_refresh = \"1m\"\njwks_max_stale = \"0s\"\n" + srv,
			want: `mcpmux.toml:5: [upstream.jwt] jwks_refresh: applies only to keys fetched from jwks_url or by discovery` + "\n" +
				`mcpmux.toml:6: [upstream.jwt] jwks_max_stale: must be positive, not "0s"`,
		},
		{
			name: "jwt value types",
			src: "[upstream.jwt]\nissuer = \"i\"\naudience = [\"a\"]\njwks_file = \"k\"\n" +
				"authorization_servers = [\n  \"x\",\n  \"\",\n  1,\n]\n" + srv,
			want: `mcpmux.toml:3: [upstream.jwt] audience: must be a string, not an array` + "\n" +
				`mcpmux.toml:8: [upstream.jwt] authorization_servers[2]: must be a string, not an integer`,
		},
		{
			name: "jwt empty authorization server",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"k\"\nauthorization_servers = [\"x\", \"\"]\n" + srv,
			want: `mcpmux.toml:5: [upstream.jwt] authorization_servers[1]: must not be empty`,
		},
		{
			name: "jwt unknown key",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"k\"\njwks_fil = \"k\"\n" + srv,
			want: `mcpmux.toml:5: [upstream.jwt] jwks_fil: unknown key (did you mean jwks_file?)`,
		},
	})
}

func TestServerErrors(t *testing.T) {
	const remote = "[servers.r]\nurl = \"https://example.com/mcp\"\n"
	checkErrors(t, []errorTest{
		{
			name: "command and url",
			src:  "[servers.docs]\ncommand = \"x\"\nurl = \"https://example.com/mcp\"\n",
			want: `mcpmux.toml:3: [servers.docs] url: cannot be set with command: a server is either started with command or reached at url`,
		},
		{
			name: "neither command nor url",
			src:  srv + "[servers.docs]\nrequired = false\n",
			want: `mcpmux.toml:3: [servers.docs]: command or url is required: command to start a server, url to reach a remote one`,
		},
		{
			name: "url without scheme",
			src:  "[servers.r]\nurl = \"example.com/mcp\"\n",
			want: `mcpmux.toml:2: [servers.r] url: must be an absolute http or https URL, such as "https://example.com/mcp"`,
		},
		{
			name: "url host and port without scheme",
			src:  "[servers.r]\nurl = \"localhost:8080/mcp\"\n",
			want: `mcpmux.toml:2: [servers.r] url: must be an http or https URL, such as "https://example.com/mcp", not one with the scheme "localhost"`,
		},
		{
			name: "url scheme",
			src:  "[servers.r]\nurl = \"ws://example.com/mcp\"\n",
			want: `mcpmux.toml:2: [servers.r] url: must be an http or https URL, such as "https://example.com/mcp", not one with the scheme "ws"`,
		},
		{
			name: "url without host",
			src:  "[servers.r]\nurl = \"https:///mcp\"\n",
			want: `mcpmux.toml:2: [servers.r] url: must be an absolute http or https URL with a host, such as "https://example.com/mcp"`,
		},
		{
			name: "url unparsable",
			src:  "[servers.r]\nurl = \"http://[::1/mcp\"\n",
			want: `mcpmux.toml:2: [servers.r] url: invalid URL: missing ']' in host`,
		},
		{
			name: "url empty",
			src:  "[servers.r]\nurl = \"\"\n",
			want: `mcpmux.toml:2: [servers.r] url: must not be empty`,
		},
		{
			name: "url not a string",
			src:  "[servers.r]\nurl = [\"https://example.com\"]\n",
			want: `mcpmux.toml:2: [servers.r] url: must be a string, not an array`,
		},
		{
			name: "command keys with url",
			src:  remote + "args = [\"-v\"]\nenv = { A = \"1\" }\ninherit_env = [\"HOME\"]\n",
			want: `mcpmux.toml:3: [servers.r] args: not allowed with url: only for a server with command` + "\n" +
				`mcpmux.toml:4: [servers.r] env: not allowed with url: only for a server with command` + "\n" +
				`mcpmux.toml:5: [servers.r] inherit_env: not allowed with url: only for a server with command`,
		},
		{
			name: "url keys with command",
			src:  srv + "headers = { A = \"1\" }\ntransport = \"sse\"\nping_interval = \"1s\"\n",
			want: `mcpmux.toml:3: [servers.a] headers: not allowed with command: only for a server with url` + "\n" +
				`mcpmux.toml:4: [servers.a] transport: not allowed with command: only for a server with url` + "\n" +
				`mcpmux.toml:5: [servers.a] ping_interval: not allowed with command: only for a server with url`,
		},
		{
			name: "headers not a table",
			src:  remote + "headers = [\"A: 1\"]\n",
			want: `mcpmux.toml:3: [servers.r] headers: must be a table, not an array`,
		},
		{
			name: "header names",
			src:  remote + "headers = { \"X Trace\" = \"1\", \"X:Y\" = \"2\", \"\" = \"3\" }\n",
			want: `mcpmux.toml:3: [servers.r] headers."X Trace": invalid header name` + "\n" +
				`mcpmux.toml:3: [servers.r] headers."X:Y": invalid header name` + "\n" +
				`mcpmux.toml:3: [servers.r] headers."": invalid header name`,
		},
		{
			name: "header value type",
			src:  remote + "[servers.r.headers]\nA = \"1\"\nB = 2\n",
			want: `mcpmux.toml:5: [servers.r] headers.B: must be a string, not an integer`,
		},
		{
			name: "header variable unset",
			src:  remote + "headers = { Authorization = \"Bearer ${R_TOKEN}\" }\n",
			want: `mcpmux.toml:3: [servers.r] headers.Authorization: environment variable R_TOKEN is not set`,
		},
		{
			name: "header value with newline",
			src:  remote + "headers = { Authorization = \"Bearer ${R_TOKEN}\" }\n",
			vars: map[string]string{"R_TOKEN": "abc\nX-Evil: 1"},
			want: `mcpmux.toml:3: [servers.r] headers.Authorization: invalid header value: control characters (such as a newline) are not allowed`,
		},
		{
			name: "header names differing in case",
			src:  remote + "[servers.r.headers]\nx-api-key = \"a\"\nX-Trace = \"1\"\nX-API-Key = \"b\"\n",
			want: `mcpmux.toml:6: [servers.r] headers.X-API-Key: the same header as [servers.r] headers.x-api-key: header names are case-insensitive`,
		},
		{
			name: "transport",
			src:  remote + "transport = \"http\"\n",
			want: `mcpmux.toml:3: [servers.r] transport: must be one of streamable, sse, not "http"`,
		},
		{
			name: "replace",
			src:  remote + "replace = \"later\"\n",
			want: `mcpmux.toml:3: [servers.r] replace: must be one of start-first, stop-first, not "later"`,
		},
		{
			name: "ping_interval",
			src:  remote + "ping_interval = \"0s\"\n",
			want: `mcpmux.toml:3: [servers.r] ping_interval: must be positive, not "0s"`,
		},
		{
			name: "required",
			src:  srv + "required = \"no\"\n" + remote + "required = 0\n",
			want: `mcpmux.toml:3: [servers.a] required: must be a boolean (true or false), not a string` + "\n" +
				`mcpmux.toml:6: [servers.r] required: must be a boolean (true or false), not an integer`,
		},
		{
			name: "unknown key in remote server",
			src:  remote + "header = { A = \"1\" }\n",
			want: `mcpmux.toml:3: [servers.r] header: unknown key (did you mean headers?)`,
		},
	})
}

func TestLoopbackListen(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:7300", "127.1.2.3:0", "[::1]:7300", "localhost:7300",
		"LocalHost:1", "[::ffff:127.0.0.1]:65535",
	} {
		cfg, err := Parse(file, []byte("[upstream]\nlisten = \""+addr+"\"\n"+srv), nil)
		if err != nil {
			t.Errorf("listen %q: %v", addr, err)
			continue
		}
		if cfg.Upstream.Listen != addr || cfg.Upstream.AuthConfigured() {
			t.Errorf("listen %q: Listen = %q, AuthConfigured = %v", addr, cfg.Upstream.Listen, cfg.Upstream.AuthConfigured())
		}
	}

	// Beyond loopback, any one kind of authentication will do, or
	// allow_unauthenticated.
	for _, auth := range []string{
		"allow_unauthenticated = true\n",
		"trusted_header = \"X-Forwarded-User\"\n",
		"[[upstream.tokens]]\nidentity = \"a\"\nsha256 = \"" + digestA + "\"\n",
		"[[upstream.tokens]]\nidentity = \"a\"\nenv = \"T\"\n",
		"[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"k\"\n",
	} {
		for _, addr := range []string{":7300", "0.0.0.0:7300", "[::]:0", "192.0.2.1:80", "mcp.example.com:443"} {
			src := "[upstream]\nlisten = \"" + addr + "\"\n" + auth + srv
			if _, err := Parse(file, []byte(src), env(map[string]string{"T": "t"})); err != nil {
				t.Errorf("listen %q with\n%s: %v", addr, auth, err)
			}
		}
	}
}

func TestCheckListen(t *testing.T) {
	tokens := []Token{{Identity: "a", SHA256: digestA, Line: 1}}
	tests := []struct {
		u    Upstream
		want string // "" for no error
	}{
		{Upstream{}, ""},
		{Upstream{Listen: "127.0.0.1:7300"}, ""},
		{Upstream{Listen: "[::1]:0", AdminListen: "[::1]:0"}, ""},
		{Upstream{Listen: "localhost:7300", AdminListen: "localhost:7301"}, ""},
		{Upstream{Listen: ":7300", Tokens: tokens}, ""},
		{Upstream{Listen: ":7300", JWT: &JWT{Issuer: "i"}}, ""},
		{Upstream{Listen: ":7300", TrustedHeader: "X-User"}, ""},
		{Upstream{Listen: "0.0.0.0:7300", AllowUnauthenticated: true}, ""},
		{Upstream{Listen: "7300"}, `invalid address "7300": use host:port, such as "127.0.0.1:7300", "[::1]:7300" or ":7300" (every interface)`},
		{Upstream{Listen: "a b:x"}, `invalid host "a b" in "a b:x": use an IP address or a host name; invalid port "x" in "a b:x": use a number from 0 to 65535`},
		{Upstream{Listen: "127.0.0.1:9090", AdminListen: ":9090"}, `"127.0.0.1:9090" is also [upstream] admin_listen: the two must differ`},
		{Upstream{Listen: ":7300"}, `":7300" listens on every interface, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, or set allow_unauthenticated = true to let any caller in as [upstream] identity`},
		{Upstream{Listen: "10.1.2.3:7300", Tokens: []Token{}}, `"10.1.2.3:7300" is not a loopback address, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, or set allow_unauthenticated = true to let any caller in as [upstream] identity`},
	}
	for _, tt := range tests {
		err := tt.u.CheckListen()
		if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
			t.Errorf("%+v: CheckListen() = %v, want %q", tt.u, err, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	vars := map[string]string{"AGENT_TOKEN": "agent-s3cret", "OPS_TOKEN": "ops-s3cret"}
	tests := []struct {
		name string
		src  string
		want []Token
	}{
		{"array of tables", `
[upstream]
identity = "reader"

[[upstream.tokens]]
identity = "agent"
env = "AGENT_TOKEN"

[[upstream.tokens]] # rotating
sha256 = "` + strings.ToUpper(digestA) + `"
identity = "agent"

[[upstream.tokens]]
identity = "ops"
env = "OPS_TOKEN"
`, []Token{
			{Identity: "agent", Env: "AGENT_TOKEN", Value: "agent-s3cret", Line: 5},
			{Identity: "agent", SHA256: digestA, Line: 9},
			{Identity: "ops", Env: "OPS_TOKEN", Value: "ops-s3cret", Line: 13},
		}},
		{"inline", `
[upstream]
tokens = [
  { identity = "agent", env = "AGENT_TOKEN" },

  { identity = "b", sha256 = "` + digestB + `" },
]
`, []Token{
			{Identity: "agent", Env: "AGENT_TOKEN", Value: "agent-s3cret", Line: 4},
			{Identity: "b", SHA256: digestB, Line: 6},
		}},
		{"dotted", `
upstream.tokens = [{ identity = "agent", env = "AGENT_TOKEN" }]
`, []Token{
			{Identity: "agent", Env: "AGENT_TOKEN", Value: "agent-s3cret", Line: 2},
		}},
		{"none", "[upstream]\ntokens = []\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustParse(t, tt.src+srv, vars)
			if !reflect.DeepEqual(cfg.Upstream.Tokens, tt.want) {
				t.Errorf("Tokens = %+v\nwant %+v", cfg.Upstream.Tokens, tt.want)
			}
			if got := cfg.Upstream.AuthConfigured(); got != (len(tt.want) > 0) {
				t.Errorf("AuthConfigured() = %v", got)
			}
		})
	}

	// The variables come from the getenv given to Parse, and nowhere else.
	t.Setenv("AGENT_TOKEN", "from the process")
	_, err := Parse("m.toml", []byte("[[upstream.tokens]]\nidentity = \"a\"\nenv = \"AGENT_TOKEN\"\n"+srv), nil)
	if want := "m.toml:3: [upstream] tokens[0].env: environment variable AGENT_TOKEN is not set"; err == nil || err.Error() != want {
		t.Errorf("Parse with a nil getenv: %v, want %s", err, want)
	}
}

func TestJWT(t *testing.T) {
	tests := []struct {
		name, file, src string
		want            *JWT
	}{
		{
			name: "defaults",
			file: "/etc/mcpmux/mcpmux.toml",
			src:  "[upstream.jwt]\nissuer = \"https://auth.example.com\"\naudience = \"https://mcp.example.com/mcp\"\njwks_file = \"jwks.json\"\n",
			want: &JWT{
				Issuer:               "https://auth.example.com",
				Audience:             "https://mcp.example.com/mcp",
				JWKSFile:             "/etc/mcpmux/jwks.json",
				IdentityClaim:        "sub",
				AuthorizationServers: []string{"https://auth.example.com"},
			},
		},
		{
			name: "relative path up",
			file: "/etc/mcpmux/mcpmux.toml",
			src:  "[upstream]\njwt = { issuer = \"i\", audience = \"a\", jwks_file = \"../keys/./jwks.json\", identity_claim = \"email\" }\n",
			want: &JWT{
				Issuer:               "i",
				Audience:             "a",
				JWKSFile:             "/etc/keys/jwks.json",
				IdentityClaim:        "email",
				AuthorizationServers: []string{"i"},
			},
		},
		{
			name: "jwks_url with defaults",
			file: "/etc/mcpmux/mcpmux.toml",
			src:  "[upstream.jwt]\nissuer = \"https://idp\"\naudience = \"a\"\njwks_url = \"http://127.0.0.1:8080/keys\"\n",
			want: &JWT{
				Issuer: "https://idp", Audience: "a", JWKSURL: "http://127.0.0.1:8080/keys",
				JWKSRefresh: 15 * time.Minute, JWKSMaxStale: 24 * time.Hour, JWKSTimeout: 10 * time.Second,
				IdentityClaim: "sub", AuthorizationServers: []string{"https://idp"},
			},
		},
		{
			name: "discovery with durations",
			file: "/etc/mcpmux/mcpmux.toml",
			src:  "[upstream.jwt]\nissuer = \"https://idp\"\naudience = \"a\"\ndiscovery = true\njwks_refresh = \"5m\"\njwks_max_stale = \"1h\"\njwks_timeout = \"3s\"\n",
			want: &JWT{
				Issuer: "https://idp", Audience: "a", Discovery: true,
				JWKSRefresh: 5 * time.Minute, JWKSMaxStale: time.Hour, JWKSTimeout: 3 * time.Second,
				IdentityClaim: "sub", AuthorizationServers: []string{"https://idp"},
			},
		},
		{
			name: "absolute path",
			file: "/etc/mcpmux/mcpmux.toml",
			src:  "[upstream.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_file = \"/var/lib/jwks//k.json\"\nauthorization_servers = [\"x\"]\n",
			want: &JWT{
				Issuer:               "i",
				Audience:             "a",
				JWKSFile:             "/var/lib/jwks/k.json",
				IdentityClaim:        "sub",
				AuthorizationServers: []string{"x"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(tt.file, []byte(tt.src+srv), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Upstream.JWT, tt.want) {
				t.Errorf("JWT = %+v\nwant %+v", cfg.Upstream.JWT, tt.want)
			}
			if !cfg.Upstream.AuthConfigured() {
				t.Error("AuthConfigured() = false with a JWT")
			}
		})
	}

	// A relative config file name: jwks_file is still absolute.
	cfg, err := Parse("conf/mcpmux.toml", []byte(tests[0].src+srv), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Upstream.JWT.JWKSFile; !filepath.IsAbs(p) || !strings.HasSuffix(p, "/conf/jwks.json") {
		t.Errorf("JWKSFile = %q, want an absolute path ending in /conf/jwks.json", p)
	}
}

func TestUpstreamHTTP(t *testing.T) {
	cfg := mustParse(t, "[upstream]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\npath = \"/\"\n"+srv, nil)
	want := Upstream{
		Listen:             "127.0.0.1:0",
		AdminListen:        "127.0.0.1:0", // port 0 twice: two free ports
		Path:               "/",
		SessionIdleTimeout: 30 * time.Minute,
		DrainTimeout:       30 * time.Second,
	}
	if !reflect.DeepEqual(cfg.Upstream, want) {
		t.Errorf("Upstream = %+v\nwant %+v", cfg.Upstream, want)
	}

	// Empty addresses are the defaults: no HTTP, no admin listener.
	cfg = mustParse(t, "[upstream]\nlisten = \"\"\nadmin_listen = \"\"\ntrusted_header = \"\"\n"+srv, nil)
	if cfg.Upstream.Listen != "" || cfg.Upstream.AdminListen != "" || cfg.Upstream.AuthConfigured() {
		t.Errorf("Upstream = %+v", cfg.Upstream)
	}

	cfg = mustParse(t, "[upstream]\ntrusted_header = \"X-Forwarded-User\"\n"+srv, nil)
	if !cfg.Upstream.AuthConfigured() {
		t.Error("AuthConfigured() = false with a trusted header")
	}
}

func TestRemoteServer(t *testing.T) {
	cfg := mustParse(t, `
[servers.local]
command = "x"

[servers.search]
url = "HTTPS://search.example.com/mcp"
headers = { Authorization = "Bearer ${SEARCH_TOKEN}", X-Cost = "$$1" }

[servers.legacy]
url = "http://127.0.0.1:9000/sse"
transport = "sse"
required = false
`, map[string]string{"SEARCH_TOKEN": "t0k"})
	want := []Server{{
		Alias:            "local",
		Command:          "x",
		TrustAnnotations: true, Prefix: true,
		StartupTimeout: 10 * time.Second,
		Required:       true,
		MaxInFlight:    DefaultMaxInFlight,
		MaxQueued:      DefaultMaxQueued,
		Replace:        "start-first",
	}, {
		Alias:            "search",
		URL:              "HTTPS://search.example.com/mcp",
		Headers:          map[string]string{"Authorization": "Bearer t0k", "X-Cost": "$1"},
		Transport:        "streamable",
		PingInterval:     15 * time.Second,
		TrustAnnotations: true, Prefix: true,
		StartupTimeout: 10 * time.Second,
		Required:       true,
		MaxInFlight:    DefaultMaxInFlight,
		MaxQueued:      DefaultMaxQueued,
		Replace:        "start-first",
	}, {
		Alias:            "legacy",
		URL:              "http://127.0.0.1:9000/sse",
		Transport:        "sse",
		PingInterval:     15 * time.Second,
		TrustAnnotations: true, Prefix: true,
		StartupTimeout: 10 * time.Second,
		Required:       false,
		MaxInFlight:    DefaultMaxInFlight,
		MaxQueued:      DefaultMaxQueued,
		Replace:        "start-first",
	}}
	if !reflect.DeepEqual(cfg.Servers, want) {
		t.Errorf("Servers = %+v\nwant %+v", cfg.Servers, want)
	}
	for i, remote := range []bool{false, true, true} {
		if got := cfg.Servers[i].Remote(); got != remote {
			t.Errorf("%s: Remote() = %v, want %v", cfg.Servers[i].Alias, got, remote)
		}
	}
}

// TestLater checks the mechanism that refuses keys of a later version,
// with keys made up for the test (every key once listed is supported now).
func TestLater(t *testing.T) {
	defer func(u, s []later) { upstreamLater, serverLater = u, s }(upstreamLater, serverLater)
	upstreamLater = []later{{"quic", "QUIC is not supported yet"}}
	serverLater = []later{{"wasm", "WebAssembly servers are not supported yet"}}

	checkErrors(t, []errorTest{{
		name: "later keys",
		src:  "[upstream]\nquic = true\n" + srv + "wasm = \"x.wasm\"\n",
		want: "mcpmux.toml:2: [upstream] quic: QUIC is not supported yet\n" +
			"mcpmux.toml:5: [servers.a] wasm: WebAssembly servers are not supported yet",
	}})
	// Not present, not a problem.
	mustParse(t, srv, nil)
}

// The upstream's secrets are serve's alone: parsed offline (for tools,
// call, pins and validate), a token whose variable is unset or empty is a
// warning, and the token is kept without its value, so that everything
// else about the config (authentication is configured) holds as for serve.
func TestOfflineSecrets(t *testing.T) {
	src := `[upstream]
listen = ":7300"

[[upstream.tokens]]
identity = "agent"
env = "AGENT_TOKEN"

[[upstream.tokens]]
identity = "restricted"
env = "RESTRICTED_TOKEN"

[[upstream.tokens]]
identity = "ops"
env = "OPS_TOKEN"
` + srv
	vars := env(map[string]string{"AGENT_TOKEN": "agent-s3cret", "OPS_TOKEN": ""})
	cfg, warnings, err := ParseOffline("m.toml", []byte(src), vars)
	if err != nil {
		t.Fatalf("ParseOffline: %v", err)
	}
	want := []string{
		"m.toml:10: [upstream] tokens[1].env: environment variable RESTRICTED_TOKEN is not set (only serve needs it)",
		"m.toml:14: [upstream] tokens[2].env: environment variable OPS_TOKEN is empty (only serve needs it)",
	}
	var got []string
	for _, w := range warnings {
		got = append(got, w.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantTokens := []Token{
		{Identity: "agent", Env: "AGENT_TOKEN", Value: "agent-s3cret", Line: 4},
		{Identity: "restricted", Env: "RESTRICTED_TOKEN", Line: 8},
		{Identity: "ops", Env: "OPS_TOKEN", Line: 12},
	}
	if !reflect.DeepEqual(cfg.Upstream.Tokens, wantTokens) || !cfg.Upstream.AuthConfigured() {
		t.Errorf("Tokens = %+v\nwant %+v", cfg.Upstream.Tokens, wantTokens)
	}

	// serve's parse refuses them, as before.
	if _, err := Parse("m.toml", []byte(src), vars); err == nil || !strings.Contains(err.Error(), "m.toml:10: [upstream] tokens[1].env: environment variable RESTRICTED_TOKEN is not set\n") {
		t.Errorf("Parse: %v; want RESTRICTED_TOKEN's error", err)
	}
	// Anything else stays an error offline: a variable name that cannot
	// be one, a child's environment (tools and call start the children).
	for _, bad := range []struct{ src, want string }{
		{"[[upstream.tokens]]\nidentity = \"a\"\nenv = \"NOT-A-NAME\"\n" + srv, `m.toml:3: [upstream] tokens[0].env: invalid variable name "NOT-A-NAME"`},
		{"[servers.a]\ncommand = \"x\"\nenv = { T = \"${DOCS_TOKEN}\" }\n", "m.toml:3: [servers.a] env.T: environment variable DOCS_TOKEN is not set"},
	} {
		if cfg, _, err := ParseOffline("m.toml", []byte(bad.src), vars); cfg != nil || err == nil || err.Error() != bad.want {
			t.Errorf("ParseOffline: %v, %v; want %s", cfg, err, bad.want)
		}
	}
}
