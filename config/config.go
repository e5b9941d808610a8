// Package config owns mcpmux's configuration file: it decodes the file
// strictly (an unknown or misspelt key is an error, never silently ignored),
// fills in defaults, validates every value up front, and computes the
// environment each child server is started with.
//
// Every problem is reported as FILE:LINE: message, and Load reports all the
// problems it can find at once rather than stopping at the first.
//
// The file looks like this (see config.example.toml for every key):
//
//	[mux]
//	separator = "__"
//	policy_dir = "policies"
//
//	[upstream]
//	identity = "reader"
//	listen = "127.0.0.1:7300"
//
//	[[upstream.tokens]]
//	identity = "agent"
//	env = "AGENT_TOKEN"
//
//	[servers.docs]
//	command = "./bin/docs-server"
//	env = { TOKEN = "${DOCS_TOKEN}" }
//	read_only = ["search*"]
//
//	[servers.search]
//	url = "https://search.example.com/mcp"
//	headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/config/tomlpos"
	toml "github.com/pelletier/go-toml/v2"
)

// Defaults for keys the file leaves out.
const (
	DefaultSeparator      = "__"
	DefaultPolicyDir      = "policies"
	DefaultMaxNameLength  = 48
	DefaultCallTimeout    = 60 * time.Second
	DefaultLogLevel       = "info"
	DefaultLogFormat      = "json"
	DefaultPageSize       = 0
	DefaultStartupTimeout = 10 * time.Second

	DefaultPath               = "/mcp"
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultDrainTimeout       = 30 * time.Second
	DefaultIdentityClaim      = "sub"
	DefaultPinning            = PinningWarn
	DefaultCatalog            = CatalogFull
	DefaultSearchAbove        = 40
	DefaultPinFile            = "mcpmux.lock"
	DefaultPinNew             = PinNewByMode
	DefaultJWKSRefresh        = 15 * time.Minute
	DefaultJWKSMaxStale       = 24 * time.Hour
	DefaultJWKSTimeout        = 10 * time.Second
	DefaultTransport          = "streamable"     // remote servers only
	DefaultPingInterval       = 15 * time.Second // remote servers only
)

// How a server changed in how it starts is replaced while mcpmux runs
// (Server.Replace).
const (
	// ReplaceStartFirst starts the new child, then drains and stops the old.
	ReplaceStartFirst = "start-first"
	// ReplaceStopFirst drains and stops the old child, then starts the new:
	// for a server that cannot run twice at once (it holds a lock or a
	// port). Calls meanwhile wait for the new one as through a restart.
	ReplaceStopFirst = "stop-first"
)

// Limits enforced by validation.
const (
	// NameRoom is the least room an exposed name leaves after its alias and
	// separator: one character of the tool's name, '_' and an 8-digit hash.
	NameRoom         = 10
	MinMaxNameLength = 8
	MaxMaxNameLength = 128
	MaxAliasLength   = 32
	// ReservedAlias is the prefix of mcpmux's own tools (catalog = "search").
	ReservedAlias = "mcpmux"
)

// Config is a loaded, validated configuration. Every field is set: keys the
// file leaves out hold their defaults.
type Config struct {
	File     string // absolute path of the config file
	Mux      Mux
	Upstream Upstream
	Limits   Limits
	// Telemetry is the [telemetry] table (telemetry.go).
	Telemetry Telemetry
	Replicas  Replicas // [replicas]: off unless the table is there
	Servers   []Server // in the order they appear in the file
}

// Mux is the [mux] table: how mcpmux itself behaves.
type Mux struct {
	// Separator joins a server's alias and a tool name into the exposed
	// name: alias + Separator + tool. It is "_" or "__".
	Separator string
	// PolicyDir is the absolute directory holding one policy file per
	// identity. A relative policy_dir is taken relative to the directory of
	// the config file.
	PolicyDir string
	// MaxNameLength is the longest exposed tool name, 8..128.
	MaxNameLength int
	// CallTimeout bounds each tools/call forwarded to a child; > 0.
	CallTimeout time.Duration
	// LogLevel is a zerolog level name: trace, debug, info, warn, error,
	// fatal, panic or disabled.
	LogLevel string
	// LogFormat is "json" or "console".
	LogFormat string
	// PageSize is the page size of the upstream tools/list; 0 means the
	// whole catalog in one page.
	PageSize int

	// Catalog is how tools/list shows the tools to an identity whose policy
	// does not say: CatalogFull (every tool it may call), CatalogSearch
	// (mcpmux's own find_tools and call_tool, and the policy's always
	// tools) or CatalogAuto (search once it may call more than
	// SearchAbove tools).
	Catalog     string
	SearchAbove int

	// Pinning is what a tool or prompt whose definition differs from its
	// pin does: "off" (no pins are kept), "warn" (it stays exposed, and the
	// change is logged and counted) or "enforce" (it is held: not listed,
	// and a call to it is refused like an unknown tool, until approved).
	Pinning string
	// PinFile is the absolute path of the pin file (default mcpmux.lock
	// next to the config file). A relative pin_file is taken relative to the
	// directory of the config file; it need not exist.
	PinFile string
	// PinNew is what a tool or prompt never pinned before does: "pin" (it
	// is pinned on first sight and exposed), "hold" (held until approved,
	// like a changed one under enforce) or "" (not set: see HoldNew).
	PinNew string
}

// HoldNew reports whether a tool or prompt never pinned before is held
// until approved rather than pinned on first sight, given whether pins
// exist yet (a pin file, or pins kept in memory): as pin_new says, or, when
// it is not set, held under enforce once pins exist, so that a server
// swapped in under an alias does not bring its tools in unreviewed; before
// then everything is pinned (trust on first use).
func (m *Mux) HoldNew(pinsExist bool) bool {
	switch m.PinNew {
	case PinNewHold:
		return true
	case PinNewPin:
		return false
	}
	return m.Pinning == PinningEnforce && pinsExist
}

// The values of [mux] pinning and pin_new.
const (
	CatalogFull    = "full"
	CatalogSearch  = "search"
	CatalogAuto    = "auto"
	PinningOff     = "off"
	PinningWarn    = "warn"
	PinningEnforce = "enforce"
	PinNewPin      = "pin"
	PinNewHold     = "hold"
	PinNewByMode   = "" // pin_new not set (Mux.HoldNew)
)

// Upstream is the [upstream] table: the side mcpmux serves.
type Upstream struct {
	// Identity is the identity of the stdio client, whose policy applies
	// to it. "" means the file configures none (the caller may supply one,
	// for example from a flag).
	Identity string

	// Listen is the address of the streamable HTTP upstream ("host:port",
	// port 0..65535); "" serves no HTTP. Path is where MCP is served on it
	// (default "/mcp"); it starts with "/".
	Listen string
	Path   string
	// AdminListen, when set, serves /healthz, /readyz and /metrics on their
	// own address; otherwise they are served on Listen. It never collides
	// with Listen.
	AdminListen string
	// DebugListen, when set, serves Go's profiles (net/http/pprof, under
	// /debug/pprof/) on a loopback address of its own; "" serves none.
	DebugListen string
	// AllowUnauthenticated lets a non-loopback Listen start with no
	// authentication configured; every caller is then Identity. Without it,
	// a Listen beyond loopback (any host but localhost, 127.0.0.0/8 and ::1;
	// an empty host is every interface) requires AuthConfigured.
	AllowUnauthenticated bool
	// Tokens are bearer tokens, each standing for one identity, in file
	// order. No two are the same token.
	Tokens []Token
	// JWT, when non-nil, accepts signed JWTs as bearer tokens.
	JWT *JWT
	// TrustedHeader names a request header that an authenticating proxy in
	// front of mcpmux sets to the caller's identity; "" trusts none.
	TrustedHeader string
	// TrustedHeaderWithTokens accepts the trusted header alongside tokens
	// or JWT: a request with an Authorization header is judged by it
	// alone, one without by the header. Without it, the config refuses
	// the header together with tokens or JWT.
	TrustedHeaderWithTokens bool
	// SessionIdleTimeout drops HTTP sessions idle this long; > 0.
	SessionIdleTimeout time.Duration
	// DrainTimeout is how long in-flight calls may finish after SIGTERM;
	// >= 0.
	DrainTimeout time.Duration
	// DrainDelay: serving on after SIGTERM, /readyz at 503; >= 0.
	DrainDelay time.Duration
}

// Token is one [[upstream.tokens]] entry. Exactly one of SHA256 and Env is
// set in the file.
type Token struct {
	Identity string // a valid identity (see ValidIdentity)
	// SHA256 is the hex SHA-256 digest of the token (lower case, 64 digits).
	SHA256 string
	// Env names the environment variable holding the token; Load reads it
	// (Parse through its getenv), and Value holds it, never empty. The file
	// never holds the token itself.
	Env   string
	Value string
	Line  int // where the entry starts ([[upstream.tokens]]), for messages
}

// JWT is the [upstream.jwt] table: mcpmux as an OAuth resource server.
type JWT struct {
	Issuer   string // the iss accepted; never empty
	Audience string // mcpmux's own URL; a token for another audience is refused; never empty
	// Exactly one of JWKSFile, JWKSURL and Discovery says where the
	// issuer's public keys are.
	//
	// JWKSFile is the absolute path of a local JWKS, re-read when it
	// changes. A relative jwks_file is taken relative to the directory of
	// the config file; it need not exist when the file is loaded.
	JWKSFile string
	// JWKSURL is the identity provider's JWKS URL: https, or http to a
	// loopback address only (for tests).
	JWKSURL string
	// Discovery finds the JWKS URL in the issuer's
	// /.well-known/openid-configuration (jwks_uri); the issuer must then
	// be an https URL (or http to loopback).
	Discovery bool
	// JWKSRefresh is how often keys from a URL are fetched again; > 0.
	JWKSRefresh time.Duration
	// JWKSMaxStale is how long the last keys fetched stay valid while the
	// provider cannot be reached; after that no JWT is accepted until a
	// fetch succeeds. > 0.
	JWKSMaxStale time.Duration
	// JWKSTimeout bounds each fetch from the provider; > 0.
	JWKSTimeout time.Duration
	// IdentityClaim is the claim whose string value is the identity
	// (default "sub").
	IdentityClaim string
	// AuthorizationServers are advertised in the protected-resource
	// metadata (default: Issuer); never empty.
	AuthorizationServers []string
}

// Server is one [servers.ALIAS] table: a child MCP server, either a
// process speaking MCP over stdio (Command) or a remote server (URL).
type Server struct {
	// Alias is the table key: lower-case letters, digits and inner '-'
	// (never '_', so exposed names split unambiguously), at most 32 bytes.
	Alias string
	// Command is the program to run; "" for a remote server. A relative
	// command containing '/' has
	// been made absolute against the config file's directory; a bare name is
	// kept as written and looked up in PATH when the child starts. Args, Env
	// and InheritEnv are only ever set with Command.
	Command string
	Args    []string
	// Env holds variables set for the child, with ${VAR} references already
	// expanded from mcpmux's environment.
	Env map[string]string
	// InheritEnv names variables passed through from mcpmux's environment
	// (when set there), in addition to the basic ones Environ always passes.
	InheritEnv []string

	// URL is a remote child's MCP endpoint, an absolute http or https URL;
	// exactly one of Command and URL is set. Headers, Transport and
	// PingInterval are only ever set with URL.
	URL string
	// Headers are sent with every request to URL, ${VAR} expanded. Names
	// are valid header names as written, no two equal but for case.
	Headers map[string]string
	// Transport is "streamable" (default) or "sse" (the legacy transport);
	// "" for a command.
	Transport string
	// PingInterval is how often a remote child is pinged; three misses in
	// a row mark it down. > 0 (default 15s); 0 for a command.
	PingInterval time.Duration

	// Hide and ReadOnly are glob patterns over the child's own tool names,
	// as written; each is known to compile with internal/glob.
	// Hidden tools are never exposed; read-only tools are safe to re-run.
	Hide     []string
	ReadOnly []string
	// TrustAnnotations says whether the child's readOnlyHint annotations
	// may mark tools read-only (in addition to ReadOnly).
	TrustAnnotations bool
	// Prefix says whether the child's tool and prompt names are exposed
	// under alias + separator and its resource URIs rewritten (default
	// true); false exposes them as the child wrote them, wherever no server
	// listed earlier exposes the same name or URI.
	Prefix bool
	// Roots are file URIs the child is told of when it asks for roots/list
	// outside any call, or during a call whose client declared no roots;
	// each is an absolute file URI.
	Roots []string
	// StartupTimeout bounds starting the child and its MCP handshake; > 0.
	StartupTimeout time.Duration
	// Required children must be ready for /readyz to answer 200 (default
	// true).
	Required bool
	// MaxInFlight is how many calls the child is sent at once; MaxQueued
	// how many more wait for a turn before calls are refused as busy.
	// Both default to the [limits] values.
	MaxInFlight int
	MaxQueued   int
	// User and Group, a name or a numeric id, are who the child runs as;
	// "" runs it as mcpmux's own user (or group). Only for a command.
	User  string
	Group string
	// Replace is ReplaceStartFirst (default) or ReplaceStopFirst.
	Replace string
}

// Remote reports whether the server is reached at URL rather than started
// with Command.
func (s Server) Remote() bool {
	return s.URL != ""
}

// Load reads and parses the config file at path, taking ${VAR} references
// and tokens' env variables from the process environment. Errors about the content are an Errors value
// that names path as written and the line of each problem.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, os.LookupEnv)
}

// LoadOffline is Load for the commands that serve nothing upstream (tools,
// call, pins): the upstream's secrets (tokens' env variables) may be
// missing. Each one that is comes back as a warning, and its Token has an
// empty Value; every other problem is an error, as for Load.
func LoadOffline(path string) (*Config, Errors, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return ParseOffline(path, data, os.LookupEnv)
}

// ParseOffline is Parse as LoadOffline does it.
func ParseOffline(file string, data []byte, getenv func(string) (string, bool)) (*Config, Errors, error) {
	cfg, errs, secrets, _ := inspect(file, data, getenv)
	if len(errs) > 0 {
		return nil, nil, errs
	}
	return cfg, offlineWarnings(secrets), nil
}

// offlineWarnings is what the problems with serve's secrets say to a
// command that does not need them.
func offlineWarnings(secrets Errors) Errors {
	for _, e := range secrets {
		e.Msg += " (only serve needs it)"
	}
	return secrets
}

// Parse parses data as the content of the config file named file: file
// names it in errors, and its directory anchors relative paths. getenv
// resolves ${VAR} references in env and headers values and reads the
// variables named by tokens' env; nil means no variable is set.
//
// On failure Parse returns a nil *Config and an Errors holding every
// problem it found, in line order.
func Parse(file string, data []byte, getenv func(string) (string, bool)) (*Config, error) {
	cfg, errs, secrets, _ := inspect(file, data, getenv)
	if all := append(slices.Clip(errs), secrets...); len(all) > 0 {
		return nil, sortByLine(all)
	}
	return cfg, nil
}

// Inspect reads the config file at path as LoadOffline does, but returns
// what it could decode together with every problem: for a report of
// everything wrong (mcpmux validate), not for running. The *Config is nil
// only when the file could not be read or is not valid TOML; otherwise a
// key in error holds its default.
//
// Its warnings are LoadOffline's, then one for each server whose command
// does not resolve now as its start would resolve it (on mcpmux's PATH): a
// bare name not found on PATH, a path that does not exist or is not an
// executable file. Such a child never starts; it is a warning, not an
// error, since the program may be installed only where serve runs.
func Inspect(path string) (*Config, Errors, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, errs, secrets, ix := inspect(path, data, os.LookupEnv)
	warnings := offlineWarnings(secrets)
	if cfg != nil {
		warnings = append(warnings, commandWarnings(path, cfg.Servers, ix)...)
	}
	if len(errs) > 0 {
		return cfg, warnings, errs
	}
	return cfg, warnings, nil
}

// inspect decodes data, returning what it could with every problem:
// those with the upstream's secrets (decoder.secrets) apart from the rest.
func inspect(file string, data []byte, getenv func(string) (string, bool)) (_ *Config, errs, secrets Errors, _ *tomlpos.Index) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, Errors{{File: file, Msg: err.Error()}}, nil, nil
	}
	if getenv == nil {
		getenv = func(string) (string, bool) { return "", false }
	}
	// Cap the slice at its length, so that positions computed from
	// subslices (which go-toml and our index derive from capacities) are
	// always within the document.
	data = data[:len(data):len(data)]

	// go-toml enforces TOML itself: syntax, duplicate keys, redefined
	// tables. That can only ever report the first problem.
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		line := 1
		msg := err.Error()
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, _ = de.Position()
		}
		msg = "invalid TOML: " + strings.TrimPrefix(msg, "toml: ")
		return nil, Errors{{File: file, Line: line, Msg: msg}}, nil, nil
	}
	ix, perr := tomlpos.Read(data)
	if perr != nil {
		line := 1
		if se, ok := errors.AsType[*tomlpos.SyntaxError](perr); ok {
			line = se.Line
		}
		return nil, Errors{{File: file, Line: line, Msg: perr.Error()}}, nil, nil
	}

	d := &decoder{file: file, dir: filepath.Dir(abs), getenv: getenv, ix: ix}
	cfg := d.config(doc)
	cfg.File = abs
	if len(d.errs) > 0 {
		return cfg, sortByLine(d.errs), sortByLine(d.secrets), ix
	}
	return cfg, nil, sortByLine(d.secrets), ix
}

// commandWarnings returns the warnings of Inspect about servers' commands
// that do not resolve; file names the config in them.
func commandWarnings(file string, servers []Server, ix *tomlpos.Index) Errors {
	var ws Errors
	for _, s := range servers {
		if s.Command == "" {
			continue
		}
		_, err := exec.LookPath(s.Command)
		if err == nil {
			continue
		}
		var why string
		switch {
		case errors.Is(err, exec.ErrDot):
			why = `is found only through a relative PATH entry (such as "."), which is not run`
		case !strings.Contains(s.Command, "/"):
			why = "not found on PATH"
		case errors.Is(err, fs.ErrNotExist):
			why = "does not exist"
		case errors.Is(err, fs.ErrPermission):
			why = "is not an executable file"
		default:
			why = "cannot be started: " + err.Error()
		}
		ws = append(ws, &Error{File: file, Line: ix.Line([]string{"servers", s.Alias, "command"}),
			Msg: fmt.Sprintf("server %s: command %q %s", s.Alias, s.Command, why)})
	}
	return ws
}

// Environ returns the environment the child process runs with, as sorted
// "KEY=value" strings. From parent (typically os.Environ()) it keeps only
// PATH, HOME, USER, LANG, every LC_* variable, TMPDIR, TZ, and the variables
// named in InheritEnv; then it sets Env, which overrides any of those. When
// parent holds a name twice, the last one wins, as with os/exec.
func (s Server) Environ(parent []string) []string {
	vars := make(map[string]string)
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if passedThrough(k) || slices.Contains(s.InheritEnv, k) {
			vars[k] = v
		}
	}
	for k, v := range s.Env {
		vars[k] = v
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	// Sort on names: sorting whole "K=V" strings would put "A-B=1" before
	// "A=1", since '-' sorts before '='.
	slices.SortFunc(env, func(a, b string) int {
		ka, _, _ := strings.Cut(a, "=")
		kb, _, _ := strings.Cut(b, "=")
		return strings.Compare(ka, kb)
	})
	return env
}

// passedThrough reports whether every child gets the variable name from
// mcpmux's environment.
func passedThrough(name string) bool {
	switch name {
	case "PATH", "HOME", "USER", "LANG", "TMPDIR", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}
