package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/config/tomlpos"
	"github.com/mcpmux/mcpmux/internal/glob"
	toml "github.com/pelletier/go-toml/v2"
)

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
		t.label, t.sep = "["+tomlpos.Dotted(path)+"]", " "
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
	et := d.table(append(slices.Clip(t.path), key, tomlpos.ElemPart(i)), m)
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
		return tomlpos.QuoteKey(key)
	}
	return t.label + t.sep + tomlpos.QuoteKey(key)
}

func (t *table) line(key string) int {
	return t.d.ix.Line(append(slices.Clip(t.path), key))
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
	t.d.errorAt(t.d.ix.Line(t.path), "%s: %s", t.label, fmt.Sprintf(format, args...))
}

func (t *table) elemErrorf(key string, i int, format string, args ...any) {
	line := t.d.ix.ElemLine(append(slices.Clip(t.path), key), i)
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

// positive decodes an integer that must be > 0.
func (t *table) positive(key string, dst *int) bool { return t.intAtLeast(key, dst, 1) }

// nonNegative decodes an integer that must be >= 0.
func (t *table) nonNegative(key string, dst *int) bool { return t.intAtLeast(key, dst, 0) }

// intAtLeast decodes an integer that must be at least least (0 or 1).
func (t *table) intAtLeast(key string, dst *int, least int) bool {
	v := *dst
	if !t.integer(key, &v) {
		return false
	}
	if v < least {
		if least > 0 {
			t.errorf(key, "must be positive, not %d", v)
		} else {
			t.errorf(key, "must not be negative, not %d", v)
		}
		return false
	}
	*dst = v
	return true
}

// number decodes a TOML integer or float.
func (t *table) number(key string, dst *float64) bool {
	v, ok := t.lookup(key)
	if !ok {
		return false
	}
	switch n := v.(type) {
	case int64:
		*dst = float64(n)
	case float64:
		*dst = n
	default:
		t.typeError(key, "a number", v)
		return false
	}
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
			t.errorf(k, "unknown key (did you mean %s?)", tomlpos.QuoteKey(s))
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
		offs[k] = t.d.ix.Offset(append(slices.Clip(t.path), k))
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
