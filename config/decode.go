package config

import (
	"errors"
	"fmt"
	"math"
	"net/textproto"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/internal/glob"
	toml "github.com/pelletier/go-toml/v2"
)

var (
	aliasRE    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	identityRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envNameRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// userRE matches user and group names as useradd takes them, and ids.
	userRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*\$?$`)
)

var logLevels = []string{"trace", "debug", "info", "warn", "error", "fatal", "panic", "disabled"}

var logFormats = []string{"json", "console"}

var transports = []string{"streamable", "sse"}

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
	ix     *index
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
	cfg.Servers = d.servers(root, cfg.Limits)
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
	t.oneOf("pinning", &m.Pinning, []string{PinningOff, PinningWarn, PinningEnforce})
	pins := DefaultPinFile
	if t.str("pin_file", &pins) && pins == "" {
		t.errorf("pin_file", "must not be empty")
	}
	m.PinFile = d.abs(pins)
	t.oneOf("pin_new", &m.PinNew, []string{PinNewPin, PinNewHold})
	t.finish()
}

// ValidIdentity reports whether name is a valid identity name: letters,
// digits, '.', '_' and '-', starting with a letter or digit. An identity
// given other than in the file (say, by a flag) should be checked with it.
func ValidIdentity(name string) bool {
	return identityRE.MatchString(name)
}

// servers decodes [servers.*] in file order.
func (d *decoder) servers(root *table, l Limits) []Server {
	if _, ok := root.m["servers"]; !ok {
		d.errorAt(1, "no servers configured: add at least one [servers.ALIAS] table")
		root.seen["servers"] = true
		return nil
	}
	t := root.table("servers")
	if t.m == nil {
		return nil // not a table; reported
	}
	if len(t.m) == 0 {
		root.errorf("servers", "no servers configured: add at least one [servers.ALIAS] table")
		return nil
	}
	var list []Server
	for _, alias := range t.keysInOrder() {
		st := t.table(alias)
		if st.m == nil {
			continue // not a table; reported
		}
		list = append(list, d.server(st, alias, l))
	}
	return list
}

func (d *decoder) server(t *table, alias string, l Limits) Server {
	s := Server{
		Alias:            alias,
		TrustAnnotations: true,
		Prefix:           true,
		StartupTimeout:   DefaultStartupTimeout,
		Required:         true,
		MaxInFlight:      l.MaxInFlight,
		MaxQueued:        l.MaxQueued,
	}
	if !aliasRE.MatchString(alias) || len(alias) > MaxAliasLength {
		t.selfErrorf("invalid alias %q: use lower-case letters, digits and inner '-' (no '_'), at most %d characters",
			alias, MaxAliasLength)
	}
	_, hasCommand := t.m["command"]
	_, hasURL := t.m["url"]
	switch {
	case hasCommand && hasURL:
		t.errorf("url", "cannot be set with command: a server is either started with command or reached at url")
	case !hasCommand && !hasURL:
		t.selfErrorf("command or url is required: command to start a server, url to reach a remote one")
	}
	// With both or neither, the kind of server is unknown: decode every
	// key rather than pile up messages about keys of the other kind.
	local := !hasURL || hasCommand
	remote := !hasCommand || hasURL

	if t.str("command", &s.Command) {
		switch {
		case s.Command == "":
			t.errorf("command", "must not be empty")
		case strings.Contains(s.Command, "/"):
			s.Command = d.abs(s.Command)
		}
	}
	if !local {
		t.onlyWith([]string{"args", "env", "inherit_env", "user", "group"}, "url", "command")
	} else {
		for _, k := range []struct {
			key string
			dst *string
		}{{"user", &s.User}, {"group", &s.Group}} {
			if t.str(k.key, k.dst) && !userRE.MatchString(*k.dst) {
				t.errorf(k.key, "invalid %s %q: give a name or a numeric id", k.key, *k.dst)
			}
		}
		t.strs("args", &s.Args)
		d.stringMap(t, "env", &s.Env, "variable", envNameRE.MatchString, nil)
		if t.strs("inherit_env", &s.InheritEnv) {
			for i, name := range s.InheritEnv {
				if !envNameRE.MatchString(name) {
					t.elemErrorf("inherit_env", i, "invalid variable name %q", name)
				}
			}
		}
	}

	if hasURL {
		s.Transport = DefaultTransport
		s.PingInterval = DefaultPingInterval
	}
	if t.str("url", &s.URL) {
		if msg := urlProblem(s.URL); msg != "" {
			t.errorf("url", "%s", msg)
		}
	}
	if !remote {
		t.onlyWith([]string{"headers", "transport", "ping_interval"}, "command", "url")
	} else {
		d.stringMap(t, "headers", &s.Headers, "header", validHeaderName, checkHeaders)
		t.oneOf("transport", &s.Transport, transports)
		t.duration("ping_interval", &s.PingInterval)
	}

	t.patterns("hide", &s.Hide)
	t.patterns("read_only", &s.ReadOnly)
	t.boolean("trust_annotations", &s.TrustAnnotations)
	t.boolean("prefix", &s.Prefix)
	if t.strs("roots", &s.Roots) {
		for i, r := range s.Roots {
			if msg := rootProblem(r); msg != "" {
				t.elemErrorf("roots", i, "%s", msg)
			}
		}
	}
	t.duration("startup_timeout", &s.StartupTimeout)
	t.boolean("required", &s.Required)
	t.positive("max_in_flight", &s.MaxInFlight)
	t.nonNegative("max_queued", &s.MaxQueued)
	t.refuse(serverLater)
	t.finish()
	return s
}

// rootProblem says what is wrong with a root the child is told of, or "".
// The protocol has roots be file URIs.
func rootProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "file" || u.Path == "" || !strings.HasPrefix(u.Path, "/") {
		return fmt.Sprintf(`invalid root %q: give an absolute file URI, such as "file:///data"`, s)
	}
	return ""
}

// onlyWith reports each of keys present in a server that has have, saying
// the key needs want instead.
func (t *table) onlyWith(keys []string, have, want string) {
	for _, k := range keys {
		if _, ok := t.lookup(k); ok {
			t.errorf(k, "not allowed with %s: only for a server with %s", have, want)
		}
	}
}

// urlProblem says what is wrong with a remote server's URL, or "".
func urlProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	u, err := url.Parse(s)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Sprintf("invalid URL: %s", oneLine(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return `must be an absolute http or https URL, such as "https://example.com/mcp"`
		}
		return fmt.Sprintf(`must be an http or https URL, such as "https://example.com/mcp", not one with the scheme %q`, u.Scheme)
	}
	if u.Host == "" {
		return `must be an absolute http or https URL with a host, such as "https://example.com/mcp"`
	}
	return ""
}

// checkHeaders reports header values that cannot be sent, and names that
// differ only in case (HTTP header names are case-insensitive).
func checkHeaders(t *table, m map[string]string, names []string) {
	first := make(map[string]string)
	for _, name := range names {
		v, ok := m[name]
		if !ok {
			continue // not a valid string; reported
		}
		if !validHeaderValue(v) {
			// The value may be a secret: never echo it.
			t.errorf(name, "invalid header value: control characters (such as a newline) are not allowed")
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if prev, dup := first[canon]; dup {
			t.errorf(name, "the same header as %s: header names are case-insensitive", t.name(prev))
		} else {
			first[canon] = name
		}
	}
}

// stringMap decodes a table of strings keyed by names (env, headers),
// expanding ${VAR} in the values. valid checks each name; check, when not
// nil, sees the decoded map and its names in file order.
func (d *decoder) stringMap(t *table, key string, dst *map[string]string, what string,
	valid func(string) bool, check func(*table, map[string]string, []string)) {
	raw, ok := t.lookup(key)
	if !ok {
		return
	}
	m, ok := raw.(map[string]any)
	if !ok {
		t.typeError(key, "a table", raw)
		return
	}
	out := make(map[string]string, len(m))
	st := d.subTable(t, key, m)
	names := st.keysInOrder()
	for _, name := range names {
		st.seen[name] = true
		if !valid(name) {
			st.errorf(name, "invalid %s name", what)
		}
		s, ok := m[name].(string)
		if !ok {
			st.typeError(name, "a string", m[name])
			continue
		}
		v, errs := expand(s, d.getenv)
		for _, err := range errs {
			st.errorf(name, "%v", err)
		}
		out[name] = v
	}
	if check != nil {
		check(st, out, names)
	}
	*dst = out
}

// checkNameRoom reports aliases that would leave no room for a tool name
// within max_name_length: at least NameRoom characters, so that a name too
// long to fit can still be shortened to a start and a hash.
func (d *decoder) checkNameRoom(cfg *Config) {
	sep, maxLen := cfg.Mux.Separator, cfg.Mux.MaxNameLength
	if sep != "_" && sep != "__" || maxLen < MinMaxNameLength || maxLen > MaxMaxNameLength {
		return // already reported
	}
	for _, s := range cfg.Servers {
		if len(s.Alias)+len(sep)+NameRoom > maxLen {
			path := []string{"servers", s.Alias}
			d.errorAt(d.ix.line(path), "[%s]: alias is too long for max_name_length %d: %q leaves no room for a tool name",
				dotted(path), maxLen, s.Alias+sep)
		}
	}
}

// abs resolves a path from the file against the file's directory.
func (d *decoder) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(d.dir, p)
}

// A table is one TOML table being decoded. Its getters mark keys as
// understood; finish reports the rest as unknown.
type table struct {
	d     *decoder
	path  []string       // path of the table in the document; nil for the root
	m     map[string]any // nil when the value was not a table
	known []string       // keys this version understands, for suggestions
	seen  map[string]bool
	// label names the table in messages ("[servers.docs]"; "" for the
	// root), and sep goes between it and a key: "[mux] separator",
	// "[servers.docs] env.TOKEN", "[upstream] tokens[0].env".
	label, sep string
}

func (d *decoder) table(path []string, m map[string]any) *table {
	t := &table{d: d, path: path, m: m, seen: make(map[string]bool)}
	if len(path) > 0 {
		t.label, t.sep = "["+dotted(path)+"]", " "
	}
	return t
}

// subTable is the table m at key in t, named in messages as a key of t
// ("[servers.docs] env") rather than by a header of its own.
func (d *decoder) subTable(t *table, key string, m map[string]any) *table {
	st := d.table(append(slices.Clip(t.path), key), m)
	st.label, st.sep = t.name(key), "."
	return st
}

// elemTable is the table m, element i of the array at key in t
// ("[upstream] tokens[0]").
func (d *decoder) elemTable(t *table, key string, i int, m map[string]any) *table {
	et := d.table(append(slices.Clip(t.path), key, elemPart(i)), m)
	et.label, et.sep = fmt.Sprintf("%s[%d]", t.name(key), i), "."
	return et
}

// table returns the sub-table at key. A missing key gives an empty table; a
// value that is not a table is reported and gives a table with a nil map.
func (t *table) table(key string) *table {
	v, ok := t.lookup(key)
	sub := t.d.table(append(slices.Clip(t.path), key), nil)
	if !ok {
		sub.m = map[string]any{}
		return sub
	}
	if m, ok := v.(map[string]any); ok {
		sub.m = m
	} else {
		t.typeError(key, "a table", v)
	}
	return sub
}

// lookup returns the value at key and marks the key as understood.
func (t *table) lookup(key string) (any, bool) {
	t.known = append(t.known, key)
	t.seen[key] = true
	v, ok := t.m[key]
	return v, ok
}

// name names key in messages: "[mux] separator", or "servers" at the top.
func (t *table) name(key string) string {
	if t.label == "" {
		return quoteKey(key)
	}
	return t.label + t.sep + quoteKey(key)
}

func (t *table) line(key string) int {
	return t.d.ix.line(append(slices.Clip(t.path), key))
}

func (t *table) errorf(key, format string, args ...any) {
	t.d.errorAt(t.line(key), "%s: %s", t.name(key), fmt.Sprintf(format, args...))
}

// secretf reports a problem with the value of a secret only serve needs
// (see decoder.secrets).
func (t *table) secretf(key, format string, args ...any) {
	t.d.secrets = append(t.d.secrets, &Error{File: t.d.file, Line: t.line(key),
		Msg: fmt.Sprintf("%s: %s", t.name(key), fmt.Sprintf(format, args...))})
}

// selfErrorf reports a problem with the table as a whole, at its start.
func (t *table) selfErrorf(format string, args ...any) {
	t.d.errorAt(t.d.ix.line(t.path), "%s: %s", t.label, fmt.Sprintf(format, args...))
}

func (t *table) elemErrorf(key string, i int, format string, args ...any) {
	line := t.d.ix.elemLine(append(slices.Clip(t.path), key), i)
	t.d.errorAt(line, "%s[%d]: %s", t.name(key), i, fmt.Sprintf(format, args...))
}

func (t *table) typeError(key, want string, v any) {
	t.errorf(key, "must be %s, not %s", want, typeName(v))
}

// The getters below store the value at key in dst and report true when the
// key is present with the right type. A value of the wrong type is reported
// and leaves dst alone.

func (t *table) str(key string, dst *string) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.typeError(key, "a string", v)
		return false
	}
	*dst = s
	return true
}

func (t *table) integer(key string, dst *int) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	i, ok := v.(int64)
	if !ok {
		t.typeError(key, "an integer", v)
		return false
	}
	if i < math.MinInt || i > math.MaxInt {
		t.errorf(key, "%d is out of range", i)
		return false
	}
	*dst = int(i)
	return true
}

func (t *table) boolean(key string, dst *bool) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		t.typeError(key, "a boolean (true or false)", v)
		return false
	}
	*dst = b
	return true
}

// strs decodes an array of strings, reporting each element of another type.
func (t *table) strs(key string, dst *[]string) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	a, ok := v.([]any)
	if !ok {
		t.typeError(key, "an array of strings", v)
		return false
	}
	list := make([]string, 0, len(a))
	good := true
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			t.elemErrorf(key, i, "must be a string, not %s", typeName(e))
			good = false
			continue
		}
		list = append(list, s)
	}
	if !good {
		return false
	}
	*dst = list
	return true
}

// duration decodes a Go duration string that must be positive.
func (t *table) duration(key string, dst *time.Duration) bool {
	return t.durationFrom(key, dst, false)
}

// durationFrom decodes a Go duration string that must be positive, or may
// also be zero when zeroOK.
func (t *table) durationFrom(key string, dst *time.Duration, zeroOK bool) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.errorf(key, `must be a duration string such as "30s" or "2m", not %s`, typeName(v))
		return false
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		t.errorf(key, `invalid duration %q: use a number and a unit, such as "30s" or "2m"`, s)
		return false
	}
	switch {
	case dur < 0 && zeroOK:
		t.errorf(key, "must not be negative, not %q", s)
		return false
	case dur <= 0 && !zeroOK:
		t.errorf(key, "must be positive, not %q", s)
		return false
	}
	*dst = dur
	return true
}

// oneOf decodes a string that must be one of choices.
func (t *table) oneOf(key string, dst *string, choices []string) bool {
	var s string
	if !t.str(key, &s) {
		return false
	}
	if !slices.Contains(choices, s) {
		t.errorf(key, "must be one of %s, not %q", strings.Join(choices, ", "), s)
		return false
	}
	*dst = s
	return true
}

// patterns decodes an array of glob patterns, keeping them as written.
func (t *table) patterns(key string, dst *[]string) bool {
	var list []string
	if !t.strs(key, &list) {
		return false
	}
	good := true
	for i, p := range list {
		// glob.CompileSet would stop at the first bad pattern; compile
		// each to report them all, with their lines.
		if _, err := glob.Compile(p); err != nil {
			t.elemErrorf(key, i, "invalid pattern %q: %s", p, oneLine(err))
			good = false
		}
	}
	if !good {
		return false
	}
	*dst = list
	return true
}

// refuse reports the keys a later version will understand.
func (t *table) refuse(keys []later) {
	for _, k := range keys {
		t.seen[k.key] = true
		if _, ok := t.m[k.key]; ok {
			t.errorf(k.key, "%s", k.msg)
		}
	}
}

// finish reports every key no getter asked for.
func (t *table) finish() {
	for _, k := range t.keysInOrder() {
		if t.seen[k] {
			continue
		}
		if s := suggest(k, t.known); s != "" {
			t.errorf(k, "unknown key (did you mean %s?)", quoteKey(s))
		} else {
			t.errorf(k, "unknown key")
		}
	}
}

// keysInOrder returns the table's keys in the order they first appear in
// the file.
func (t *table) keysInOrder() []string {
	keys := make([]string, 0, len(t.m))
	offs := make(map[string]int, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
		offs[k] = t.d.ix.offset(append(slices.Clip(t.path), k))
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := offs[a] - offs[b]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys
}

// typeName names the TOML type of a value go-toml decoded into an any.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time, toml.LocalDateTime:
		return "a date-time"
	case toml.LocalDate:
		return "a date"
	case toml.LocalTime:
		return "a time"
	}
	return fmt.Sprintf("%T", v)
}

// oneLine flattens a possibly multi-line error message (errors.Join puts
// one error per line) so that each problem stays on one line.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", ": ")
}

// suggest returns the known key closest to an unknown one, if it is close
// enough to be a likely typo.
func suggest(key string, known []string) string {
	best, bestDist := "", 3 // at most two edits
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
