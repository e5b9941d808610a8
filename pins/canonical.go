// Package pins owns tool and prompt pinning: the canonical form and digest
// of a definition, the pin file (a reviewed, committed record of the
// definitions approved for use, like go.sum), comparing live definitions
// with their pins, approving, writing the file atomically, watching it so
// that an approval on disk takes effect without a restart, and the held
// record of what running serve processes hold (held.go).
//
// A Pin is immutable; a Set of them is an immutable snapshot. The Store
// serves an Index, the kind, name, server and digest of each pin and
// nothing else, behind an atomic pointer, so reading pins takes no lock
// and a large pin file costs little memory; the fields of a pin are read
// from the file when they are needed (a diff, a log line naming what
// changed, a write).
package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Kind is what a pin is of.
type Kind string

const (
	Tool   Kind = "tool"
	Prompt Kind = "prompt"
)

// The canonical form of a definition is every member of it that is not
// null (of a member given twice, the last, as JSON decoders read it),
// with "name" the child's own name, and the server's alias as "server".
// A member of the definition named "server" is written "~server" (and
// "~server" as "~~server", and so on), so that no definition can pose as
// another server's.
const (
	fieldServer = "server"
	fieldName   = "name"
)

// partialFields are what the first canonical form (pin files of format 1,
// and pins marked v1 in later ones) kept of each kind besides server and
// name: it left out _meta, icons, execution and every other member, which
// reach the client and the model all the same.
var partialFields = map[Kind][]string{
	Tool:   {"annotations", "description", "inputSchema", "outputSchema", "title"},
	Prompt: {"arguments", "description", "title"},
}

// partialOrder is each kind's partial fields and server and name, sorted
// by key: the order a partial definition's fields are written in.
var partialOrder = func() map[Kind][]string {
	out := map[Kind][]string{}
	for k, fs := range partialFields {
		all := append(slices.Clone(fs), fieldServer, fieldName)
		slices.SortFunc(all, compareStrings)
		out[k] = all
	}
	return out
}()

// Sum is a digest: the SHA-256 of a definition's canonical fields.
type Sum [sha256.Size]byte

// String is the digest as the pin file writes it, "sha256:" and hex.
func (s Sum) String() string { return digestPrefix + hex.EncodeToString(s[:]) }

// ParseSum reads a digest written as String writes it.
func ParseSum(s string) (Sum, bool) {
	var sum Sum
	if len(s) != len(digestPrefix)+2*len(sum) || s[:len(digestPrefix)] != digestPrefix {
		return sum, false
	}
	_, err := hex.Decode(sum[:], []byte(s[len(digestPrefix):]))
	return sum, err == nil
}

const digestPrefix = "sha256:"

// Field is one canonical field of a definition: its key and its value as
// canonical JSON.
type Field struct {
	Key   string
	Value string
}

// Def is a definition in canonical form: which exposed tool or prompt it
// is, and its canonical fields sorted by key. An absent or null field is
// not in Fields.
type Def struct {
	Kind   Kind
	Name   string // exposed
	Fields []Field
}

// Canonical returns the canonical form of def, the definition a child
// listed (under any name), of the tool or prompt exposed as name, which
// server alias offers under its own name childName: all of it, as a
// client is shown it.
func Canonical(kind Kind, name, alias, childName string, def []byte) (Def, error) {
	return canonical(kind, name, alias, childName, def, true)
}

// CanonicalPartial is Canonical in the first form, which kept only the
// kind's partialFields: what a pin marked v1 holds.
func CanonicalPartial(kind Kind, name, alias, childName string, def []byte) (Def, error) {
	return canonical(kind, name, alias, childName, def, false)
}

func canonical(kind Kind, name, alias, childName string, def []byte, whole bool) (Def, error) {
	c := getCanon()
	defer c.release()
	if err := c.definition(kind, name, alias, childName, def, whole); err != nil {
		return Def{}, err
	}
	out := string(c.out)
	d := Def{Kind: kind, Name: name, Fields: make([]Field, len(c.fields))}
	for i, f := range c.fields {
		d.Fields[i] = Field{keyString(c.keys[f.k0:f.k1]), out[f.v0:f.v1]}
	}
	return d, nil
}

// Digest returns the digest of def's canonical form, what Canonical's Def
// would give, without keeping the form: for comparing with pins.
func Digest(kind Kind, alias, childName string, def []byte) (Sum, error) {
	return digest(kind, alias, childName, def, true)
}

// PartialDigest is Digest in the first form (CanonicalPartial), for
// comparing with a pin marked v1.
func PartialDigest(kind Kind, alias, childName string, def []byte) (Sum, error) {
	return digest(kind, alias, childName, def, false)
}

func digest(kind Kind, alias, childName string, def []byte, whole bool) (Sum, error) {
	c := getCanon()
	defer c.release()
	if err := c.definition(kind, childName, alias, childName, def, whole); err != nil {
		return Sum{}, err
	}
	return sha256.Sum256(c.out), nil
}

// Field returns the canonical JSON of the field key, or "" when d has none.
func (d Def) Field(key string) string {
	for _, f := range d.Fields {
		if f.Key == key {
			return f.Value
		}
	}
	return ""
}

// Server is the alias of the server that offers d.
func (d Def) Server() string { return unquote(d.Field(fieldServer)) }

// Sum is the SHA-256 of d's fields as one canonical JSON object. Two
// definitions have the same digest exactly when their canonical fields are
// equal, whatever their key order or whitespace.
func (d Def) Sum() Sum {
	c := getCanon()
	defer c.release()
	c.out = append(c.out, '{')
	for i, f := range d.Fields {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = appendEscaped(c.out, stringBytes(f.Key))
		c.out = append(c.out, ':')
		c.out = append(c.out, f.Value...)
	}
	c.out = append(c.out, '}')
	return sha256.Sum256(c.out)
}

// Digest is d's Sum as the pin file writes it.
func (d Def) Digest() string { return d.Sum().String() }

// Changed returns the keys of the fields whose values differ between a and
// b, sorted (a field only one of them has counts).
func Changed(a, b Def) []string {
	var out []string
	i, j := 0, 0
	for i < len(a.Fields) || j < len(b.Fields) {
		switch {
		case j == len(b.Fields) || i < len(a.Fields) && compareStrings(a.Fields[i].Key, b.Fields[j].Key) < 0:
			out = append(out, a.Fields[i].Key)
			i++
		case i == len(a.Fields) || compareStrings(b.Fields[j].Key, a.Fields[i].Key) < 0:
			out = append(out, b.Fields[j].Key)
			j++
		default:
			if a.Fields[i].Value != b.Fields[j].Value {
				out = append(out, a.Fields[i].Key)
			}
			i++
			j++
		}
	}
	return out
}

// canonicalJSON returns raw, one JSON value, in canonical form: no
// whitespace, object keys sorted by their UTF-16 code units (as RFC 8785
// does; of a key given twice, the last counts, as encoding/json reads it),
// strings re-escaped minimally, and numbers exactly as written (never
// through float64, so 12345678901234567890 stays as it is, and 1.0 and 1
// differ).
func canonicalJSON(raw []byte) ([]byte, error) {
	if !json.Valid(raw) {
		return nil, invalidJSON(raw)
	}
	c := getCanon()
	defer c.release()
	c.value(raw, skipSpace(raw, 0))
	return bytes.Clone(c.out), nil
}

// isCanonical reports whether raw is one JSON value in canonical form.
func isCanonical(raw []byte) (bool, error) {
	if !json.Valid(raw) {
		return false, invalidJSON(raw)
	}
	c := getCanon()
	defer c.release()
	c.value(raw, skipSpace(raw, 0))
	return bytes.Equal(c.out, raw), nil
}

// invalidJSON is why raw, which json.Valid refused, is not one JSON value.
func invalidJSON(raw []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return errors.New("more than one JSON value")
}

// canon is the scratch space of canonical forms, pooled, so that a digest
// allocates nothing once the pool is warm.
type canon struct {
	out    []byte
	keys   []byte   // the decoded keys of the objects being written, the definition's first
	mems   []member // their members, innermost object's last
	tmp    []byte
	fields []fieldSpan
	spans  []span
	top    []topMember
}

// member is one member of an object being written: its decoded key in
// keys, and its canonical `"key":value` in out.
type member struct{ k0, k1, m0, m1 int }

// fieldSpan is one field of the definition written: its key in keys, its
// value in out.
type fieldSpan struct{ k0, k1, v0, v1 int }

type span struct{ v0, v1 int }

// topMember is one member of the definition: its key in keys, and its
// value in the definition, or, for v0 < 0, the string lit.
type topMember struct {
	k0, k1, v0, v1 int
	lit            string
}

var canonPool = sync.Pool{New: func() any { return new(canon) }}

func getCanon() *canon { return canonPool.Get().(*canon) }

// maxPooled bounds the scratch space kept for the next use, so that one
// huge definition does not stay in memory.
const maxPooled = 64 << 10

func (c *canon) release() {
	if cap(c.out) > maxPooled || cap(c.keys) > maxPooled || cap(c.tmp) > maxPooled {
		return
	}
	c.out, c.keys, c.mems, c.tmp, c.fields, c.spans = c.out[:0], c.keys[:0], c.mems[:0], c.tmp[:0], c.fields[:0], c.spans[:0]
	clear(c.top) // no alias or name kept alive
	c.top = c.top[:0]
	canonPool.Put(c)
}

// definition writes to out the canonical fields of def as one JSON object,
// whole or partial, and records where each field's key and value are.
func (c *canon) definition(kind Kind, name, alias, childName string, def []byte, whole bool) error {
	keys, ok := partialOrder[kind]
	if !ok {
		return fmt.Errorf("pins: unknown kind %q", kind)
	}
	if !json.Valid(def) {
		return fmt.Errorf("%s %s: definition: %w", kind, name, invalidJSON(def))
	}
	if whole {
		return c.wholeDefinition(kind, name, alias, childName, def)
	}
	// Where each key's value is in def (the last, when given twice).
	c.spans = slices.Grow(c.spans[:0], len(keys))[:len(keys)]
	for i := range c.spans {
		c.spans[i] = span{-1, -1}
	}
	i := skipSpace(def, 0)
	switch def[i] {
	case 'n':
		// null: a definition without fields.
	case '{':
		i = skipSpace(def, i+1)
		for def[i] != '}' {
			k0 := len(c.keys)
			i = skipSpace(def, c.decodeKey(def, i)+1) // past the ':'
			v0 := i
			i = skipValue(def, i)
			for at, k := range keys {
				if string(c.keys[k0:]) == k {
					c.spans[at] = span{v0, i}
				}
			}
			c.keys = c.keys[:k0]
			if i = skipSpace(def, i); def[i] == ',' {
				i = skipSpace(def, i+1)
			}
		}
	default:
		return fmt.Errorf("%s %s: definition: not a JSON object", kind, name)
	}
	c.out = append(c.out, '{')
	for at, k := range keys {
		k0 := len(c.keys)
		c.keys = append(c.keys, k...)
		k1 := len(c.keys)
		var v0 int
		switch k {
		case fieldServer, fieldName:
			s := alias
			if k == fieldName {
				s = childName
			}
			v0 = c.keyed(k0, k1)
			c.out = appendEscaped(c.out, stringBytes(s))
		default:
			sp := c.spans[at]
			if sp.v0 < 0 || def[sp.v0] == 'n' {
				c.keys = c.keys[:k0]
				continue // absent or null
			}
			v0 = c.keyed(k0, k1)
			c.value(def, sp.v0)
		}
		c.fields = append(c.fields, fieldSpan{k0, k1, v0, len(c.out)})
	}
	c.out = append(c.out, '}')
	return nil
}

// wholeDefinition is definition of every member of def (valid JSON).
func (c *canon) wholeDefinition(kind Kind, name, alias, childName string, def []byte) error {
	c.top = c.top[:0]
	i := skipSpace(def, 0)
	switch def[i] {
	case 'n':
		// null: a definition without members.
	case '{':
		i = skipSpace(def, i+1)
		for def[i] != '}' {
			k0 := len(c.keys)
			i = skipSpace(def, c.decodeKey(def, i)+1) // past the ':'
			v0 := i
			i = skipValue(def, i)
			switch key := c.keys[k0:]; {
			case string(key) == fieldName:
				c.keys = c.keys[:k0] // the child's own name is written below
			case isServerKey(key):
				c.keys = slices.Insert(c.keys, k0, '~')
				fallthrough
			default:
				c.top = append(c.top, topMember{k0: k0, k1: len(c.keys), v0: v0, v1: i})
			}
			if i = skipSpace(def, i); def[i] == ',' {
				i = skipSpace(def, i+1)
			}
		}
	default:
		return fmt.Errorf("%s %s: definition: not a JSON object", kind, name)
	}
	for _, m := range [...]struct{ key, lit string }{{fieldName, childName}, {fieldServer, alias}} {
		k0 := len(c.keys)
		c.keys = append(c.keys, m.key...)
		c.top = append(c.top, topMember{k0: k0, k1: len(c.keys), v0: -1, lit: m.lit})
	}
	slices.SortStableFunc(c.top, func(a, b topMember) int {
		return compareBytes(c.keys[a.k0:a.k1], c.keys[b.k0:b.k1])
	})
	c.out = append(c.out, '{')
	for n, m := range c.top {
		if n+1 < len(c.top) && bytes.Equal(c.keys[m.k0:m.k1], c.keys[c.top[n+1].k0:c.top[n+1].k1]) {
			continue // a later member has the same key
		}
		if m.v0 >= 0 && def[m.v0] == 'n' {
			continue // null: absent
		}
		v0 := c.keyed(m.k0, m.k1)
		if m.v0 < 0 {
			c.out = appendEscaped(c.out, stringBytes(m.lit))
		} else {
			c.value(def, m.v0)
		}
		c.fields = append(c.fields, fieldSpan{m.k0, m.k1, v0, len(c.out)})
	}
	c.out = append(c.out, '}')
	return nil
}

// keyString is key as a string, one that is not allocated for the keys
// MCP defines.
func keyString(key []byte) string {
	switch string(key) {
	case fieldName:
		return fieldName
	case fieldServer:
		return fieldServer
	case "title":
		return "title"
	case "description":
		return "description"
	case "inputSchema":
		return "inputSchema"
	case "outputSchema":
		return "outputSchema"
	case "annotations":
		return "annotations"
	case "arguments":
		return "arguments"
	case "execution":
		return "execution"
	case "icons":
		return "icons"
	case "_meta":
		return "_meta"
	}
	return string(key)
}

// isServerKey reports whether key is "server" after any number of '~'.
func isServerKey(key []byte) bool {
	return string(bytes.TrimLeft(key, "~")) == fieldServer
}

// keyed appends the member separator if one is due, and the key in keys
// [k0:k1] with its colon; it returns where the value is to start.
func (c *canon) keyed(k0, k1 int) int {
	if len(c.fields) > 0 {
		c.out = append(c.out, ',')
	}
	c.out = appendEscaped(c.out, c.keys[k0:k1])
	c.out = append(c.out, ':')
	return len(c.out)
}

// stringBytes is s as bytes, to be read only, never kept.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// value writes the canonical form of the JSON value at in[i] (valid JSON,
// no space before it) and returns where it ends.
func (c *canon) value(in []byte, i int) int {
	switch in[i] {
	case '{':
		return c.object(in, i)
	case '[':
		c.out = append(c.out, '[')
		i = skipSpace(in, i+1)
		for n := 0; in[i] != ']'; n++ {
			if n > 0 {
				c.out = append(c.out, ',')
			}
			i = skipSpace(in, c.value(in, i))
			if in[i] == ',' {
				i = skipSpace(in, i+1)
			}
		}
		c.out = append(c.out, ']')
		return i + 1
	case '"':
		return c.str(in, i)
	}
	j := i + 1 // a number, true, false or null: as written
	for j < len(in) && !isDelim(in[j]) {
		j++
	}
	c.out = append(c.out, in[i:j]...)
	return j
}

// object writes the object at in[i] with its members sorted by key and,
// of a key given twice, the last member only.
func (c *canon) object(in []byte, i int) int {
	start, base, kbase := len(c.out), len(c.mems), len(c.keys)
	i = skipSpace(in, i+1)
	for in[i] != '}' {
		k0 := len(c.keys)
		m0 := len(c.out)
		i = c.decodeKey(in, i)
		c.out = appendEscaped(c.out, c.keys[k0:])
		c.out = append(c.out, ':')
		i = skipSpace(in, i+1)
		i = c.value(in, i)
		c.mems = append(c.mems, member{k0, len(c.keys), m0, len(c.out)})
		if i = skipSpace(in, i); in[i] == ',' {
			i = skipSpace(in, i+1)
		}
	}
	mems := c.mems[base:]
	slices.SortStableFunc(mems, func(a, b member) int {
		return compareBytes(c.keys[a.k0:a.k1], c.keys[b.k0:b.k1])
	})
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	c.out = append(c.out[:start], '{')
	first := true
	for n, m := range mems {
		if n+1 < len(mems) && bytes.Equal(c.keys[m.k0:m.k1], c.keys[mems[n+1].k0:mems[n+1].k1]) {
			continue // a later member has the same key
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = append(c.out, c.tmp[m.m0-start:m.m1-start]...)
	}
	c.out = append(c.out, '}')
	c.keys, c.mems = c.keys[:kbase], c.mems[:base]
	return i + 1
}

// decodeKey appends the decoded string at in[i] to keys and returns where
// its colon is.
func (c *canon) decodeKey(in []byte, i int) int {
	var end int
	c.keys, end = decodeString(c.keys, in, i)
	return skipSpace(in, end)
}

// str writes the string at in[i] re-escaped minimally.
func (c *canon) str(in []byte, i int) int {
	k0 := len(c.keys)
	var end int
	c.keys, end = decodeString(c.keys, in, i)
	c.out = appendEscaped(c.out, c.keys[k0:])
	c.keys = c.keys[:k0]
	return end
}

// decodeString appends the string at in[i] (valid JSON), decoded as
// encoding/json decodes it, to dst and returns dst and where it ends.
func decodeString(dst, in []byte, i int) ([]byte, int) {
	i++ // the quote
	for {
		c := in[i]
		switch {
		case c == '"':
			return dst, i + 1
		case c == '\\':
			switch e := in[i+1]; e {
			case 'u':
				r := hex4(in[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if d := utf16.DecodeRune(r, hex4(in[i+2:i+6])); d != utf8.RuneError {
							dst = utf8.AppendRune(dst, d)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			default: // " \ /
				dst = append(dst, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			dst = utf8.AppendRune(dst, r) // an invalid byte becomes U+FFFD
			i += size
		}
	}
}

// hex4 is the value of four hex digits (valid JSON has them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			r = r<<4 | rune(c-'a'+10)
		}
	}
	return r
}

// skipValue returns where the JSON value at in[i] (valid) ends.
func skipValue(in []byte, i int) int {
	switch in[i] {
	case '"':
		for i++; in[i] != '"'; i++ {
			if in[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch in[i] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			case '"':
				i = skipValue(in, i) - 1
			}
		}
	}
	for i++; i < len(in) && !isDelim(in[i]); i++ {
	}
	return i
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func skipSpace(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	return i
}

// compareStrings orders by UTF-16 code units, as JavaScript sorts and RFC
// 8785 specifies, so that a key's place does not depend on the language
// that reads the file.
func compareStrings(a, b string) int {
	return compareBytes(stringBytes(a), stringBytes(b))
}

// compareBytes is compareStrings of byte slices.
func compareBytes(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if c := compareRunes(ra, rb); c != 0 {
			return c
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func compareRunes(a, b rune) int {
	if a == b {
		return 0
	}
	if ua, ub := utf16Key(a), utf16Key(b); ua != ub {
		return int(ua) - int(ub)
	}
	return int(a) - int(b)
}

// utf16Key is the first UTF-16 code unit of r.
func utf16Key(r rune) uint16 {
	if r >= 0x10000 {
		return uint16(0xD800 + ((r - 0x10000) >> 10))
	}
	return uint16(r)
}

// appendEscaped appends s as a JSON string, escaping only what JSON
// requires (and U+FFFD, which an invalid byte decodes to, as \ufffd).
func appendEscaped(b []byte, s []byte) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] < utf8.RuneSelf && s[j] != '"' && s[j] != '\\' {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20:
			b = append(b, `\u00`...)
			b = append(b, hexDigit[r>>4], hexDigit[r&0xf])
		case r == utf8.RuneError:
			b = append(b, `\ufffd`...)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

const hexDigit = "0123456789abcdef"

func unquote(v string) string {
	var s string
	_ = json.Unmarshal([]byte(v), &s)
	return s
}
