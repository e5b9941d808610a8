package config

import (
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/mcpmux/mcpmux/config/tomlpos"
)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var logLevels = []string{"trace", "debug", "info", "warn", "error", "fatal", "panic", "disabled"}

var logFormats = []string{"json", "console"}

// Keys a later version will understand. They are refused with a message
// saying so, rather than as unknown keys. Every key once listed here is
// supported now; the mechanism stays for the next ones.
var (
	upstreamLater []later
	serverLater   []later
)

type later struct{ key, msg string }

// A decoder turns the generic map go-toml decoded into a Config, checking
// types and values and collecting every problem with its line.
type decoder struct {
	file   string // as given, for messages
	dir    string // absolute directory of the file
	getenv func(string) (string, bool)
	ix     *tomlpos.Index
	errs   Errors
	// secrets holds the problems with what only serve reads: the values
	// of upstream tokens' env variables. Only serve refuses a config for
	// them; the commands that serve nothing upstream warn.
	secrets Errors
}

func (d *decoder) errorAt(line int, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) config(doc map[string]any) *Config {
	root := d.table(nil, doc)
	cfg := &Config{}
	d.mux(root.table("mux"), &cfg.Mux)
	d.upstream(root.table("upstream"), &cfg.Upstream)
	d.limits(root.table("limits"), &cfg.Limits)
	d.telemetry(root.table("telemetry"), &cfg.Telemetry)
	d.replicas(root, &cfg.Replicas)
	cfg.Servers = d.servers(root, cfg.Limits)
	d.checkReplicas(root, cfg)
	root.finish()
	d.checkNameRoom(cfg)
	return cfg
}

func (d *decoder) mux(t *table, m *Mux) {
	*m = Mux{
		Separator:     DefaultSeparator,
		MaxNameLength: DefaultMaxNameLength,
		CallTimeout:   DefaultCallTimeout,
		LogLevel:      DefaultLogLevel,
		LogFormat:     DefaultLogFormat,
		PageSize:      DefaultPageSize,
		Pinning:       DefaultPinning,
		PinNew:        DefaultPinNew,
		Catalog:       DefaultCatalog,
		SearchAbove:   DefaultSearchAbove,
	}
	if t.str("separator", &m.Separator) && m.Separator != "_" && m.Separator != "__" {
		t.errorf("separator", `must be "_" or "__", not %q`, m.Separator)
	}
	dir := DefaultPolicyDir
	if t.str("policy_dir", &dir) && dir == "" {
		t.errorf("policy_dir", "must not be empty")
	}
	m.PolicyDir = d.abs(dir)
	if t.integer("max_name_length", &m.MaxNameLength) &&
		(m.MaxNameLength < MinMaxNameLength || m.MaxNameLength > MaxMaxNameLength) {
		t.errorf("max_name_length", "must be between %d and %d, not %d", MinMaxNameLength, MaxMaxNameLength, m.MaxNameLength)
	}
	t.duration("call_timeout", &m.CallTimeout)
	t.oneOf("log_level", &m.LogLevel, logLevels)
	t.oneOf("log_format", &m.LogFormat, logFormats)
	if t.integer("page_size", &m.PageSize) && m.PageSize < 0 {
		t.errorf("page_size", "must not be negative, not %d", m.PageSize)
	}
	t.oneOf("catalog", &m.Catalog, []string{CatalogFull, CatalogSearch, CatalogAuto})
	if t.integer("search_above", &m.SearchAbove) && m.SearchAbove < 0 {
		t.errorf("search_above", "must not be negative, not %d", m.SearchAbove)
	}
	t.oneOf("pinning", &m.Pinning, []string{PinningOff, PinningWarn, PinningEnforce})
	pins := DefaultPinFile
	if t.str("pin_file", &pins) && pins == "" {
		t.errorf("pin_file", "must not be empty")
	}
	m.PinFile = d.abs(pins)
	t.oneOf("pin_new", &m.PinNew, []string{PinNewPin, PinNewHold})
	t.finish()
}

// abs resolves a path from the file against the file's directory.
func (d *decoder) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(d.dir, p)
}
