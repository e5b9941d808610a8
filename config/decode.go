package config

import (
	"fmt"
	"math"
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
)

var logLevels = []string{"trace", "debug", "info", "warn", "error", "fatal", "panic", "disabled"}

var logFormats = []string{"json", "console"}

// Keys a later version will understand. They are refused with a message
// saying so, rather than as unknown keys.
var (
	upstreamLater = []later{
		{"listen", "serving over the network is not supported yet"},
		{"admin_listen", "the admin listener is not supported yet"},
		{"tokens", "token authentication is not supported yet"},
		{"jwt", "JWT authentication is not supported yet"},
		{"trusted_header", "identities from a trusted header are not supported yet"},
	}
	serverLater = []later{
		{"url", "remote children are not supported yet"},
		{"headers", "remote children are not supported yet"},
		{"transport", "remote children are not supported yet"},
		{"required", "required servers are not supported yet"},
	}
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
}

func (d *decoder) errorAt(line int, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) config(doc map[string]any) *Config {
	root := d.table(nil, doc)
	cfg := &Config{}
	d.mux(root.table("mux"), &cfg.Mux)
	d.upstream(root.table("upstream"), &cfg.Upstream)
	cfg.Servers = d.servers(root)
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
	t.finish()
}

// ValidIdentity reports whether name is a valid identity name: letters,
// digits, '.', '_' and '-', starting with a letter or digit. An identity
// given other than in the file (say, by a flag) should be checked with it.
func ValidIdentity(name string) bool {
	return identityRE.MatchString(name)
}

func (d *decoder) upstream(t *table, u *Upstream) {
	if t.str("identity", &u.Identity) && !ValidIdentity(u.Identity) {
		if u.Identity == "" {
			t.errorf("identity", "must not be empty (leave the key out to configure no identity)")
		} else {
			t.errorf("identity", "invalid identity %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", u.Identity)
		}
	}
	t.refuse(upstreamLater)
	t.finish()
}

// servers decodes [servers.*] in file order.
func (d *decoder) servers(root *table) []Server {
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
		list = append(list, d.server(st, alias))
	}
	return list
}

func (d *decoder) server(t *table, alias string) Server {
	s := Server{
		Alias:            alias,
		TrustAnnotations: true,
		StartupTimeout:   DefaultStartupTimeout,
	}
	if !aliasRE.MatchString(alias) || len(alias) > MaxAliasLength {
		d.errorAt(d.ix.line(t.path), "%s: invalid alias %q: use lower-case letters, digits and inner '-' (no '_'), at most %d characters",
			t.header(), alias, MaxAliasLength)
	}
	if t.str("command", &s.Command) {
		switch {
		case s.Command == "":
			t.errorf("command", "must not be empty")
		case strings.Contains(s.Command, "/"):
			s.Command = d.abs(s.Command)
		}
	} else if _, ok := t.m["command"]; !ok {
		d.errorAt(d.ix.line(t.path), "%s: command is required", t.header())
	}
	t.strs("args", &s.Args)
	d.env(t, &s.Env)
	if t.strs("inherit_env", &s.InheritEnv) {
		for i, name := range s.InheritEnv {
			if !envNameRE.MatchString(name) {
				t.elemErrorf("inherit_env", i, "invalid variable name %q", name)
			}
		}
	}
	t.patterns("hide", &s.Hide)
	t.patterns("read_only", &s.ReadOnly)
	t.boolean("trust_annotations", &s.TrustAnnotations)
	t.duration("startup_timeout", &s.StartupTimeout)
	t.refuse(serverLater)
	t.finish()
	return s
}

// env decodes a server's env table, expanding ${VAR} in the values.
func (d *decoder) env(t *table, dst *map[string]string) {
	raw, ok := t.lookup("env")
	if !ok {
		return
	}
	m, ok := raw.(map[string]any)
	if !ok {
		t.typeError("env", "a table", raw)
		return
	}
	env := make(map[string]string, len(m))
	et := d.table(append(slices.Clip(t.path), "env"), m)
	for _, name := range et.keysInOrder() {
		key := "env." + quoteKey(name)
		line := d.ix.line(append(slices.Clip(et.path), name))
		if !envNameRE.MatchString(name) {
			d.errorAt(line, "%s %s: invalid variable name", t.header(), key)
		}
		s, ok := m[name].(string)
		if !ok {
			d.errorAt(line, "%s %s: must be a string, not %s", t.header(), key, typeName(m[name]))
			continue
		}
		v, errs := expand(s, d.getenv)
		for _, err := range errs {
			d.errorAt(line, "%s %s: %v", t.header(), key, err)
		}
		env[name] = v
	}
	*dst = env
}

// checkNameRoom reports aliases that would leave no room for a tool name
// within max_name_length.
func (d *decoder) checkNameRoom(cfg *Config) {
	sep, maxLen := cfg.Mux.Separator, cfg.Mux.MaxNameLength
	if sep != "_" && sep != "__" || maxLen < MinMaxNameLength || maxLen > MaxMaxNameLength {
		return // already reported
	}
	for _, s := range cfg.Servers {
		if len(s.Alias)+len(sep)+1 > maxLen {
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
}

func (d *decoder) table(path []string, m map[string]any) *table {
	return &table{d: d, path: path, m: m, seen: make(map[string]bool)}
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

// header names the table as its TOML header would: "[servers.docs]".
func (t *table) header() string {
	return "[" + dotted(t.path) + "]"
}

// name names key in messages: "[mux] separator", or "servers" at the top.
func (t *table) name(key string) string {
	if len(t.path) == 0 {
		return quoteKey(key)
	}
	return t.header() + " " + quoteKey(key)
}

func (t *table) line(key string) int {
	return t.d.ix.line(append(slices.Clip(t.path), key))
}

func (t *table) errorf(key, format string, args ...any) {
	t.d.errorAt(t.line(key), "%s: %s", t.name(key), fmt.Sprintf(format, args...))
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
	if dur <= 0 {
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
