// Package pins owns tool and prompt pinning: the canonical form and digest
// of a definition, the pin file (a reviewed, committed record of the
// definitions approved for use, like go.sum), comparing live definitions
// with their pins, approving, writing the file atomically, and watching it
// so that an approval on disk takes effect without a restart.
//
// A Pin is immutable; a Set of them is an immutable snapshot that the Store
// publishes behind an atomic pointer, so reading pins takes no lock.
package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Kind is what a pin is of.
type Kind string

const (
	Tool   Kind = "tool"
	Prompt Kind = "prompt"
)

// The canonical fields: server and name (the child's own) for every kind,
// then what the model reads of each kind's definition.
const (
	fieldServer = "server"
	fieldName   = "name"
)

var kindFields = map[Kind][]string{
	Tool:   {"annotations", "description", "inputSchema", "outputSchema", "title"},
	Prompt: {"arguments", "description", "title"},
}

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
// server alias offers under its own name childName.
func Canonical(kind Kind, name, alias, childName string, def []byte) (Def, error) {
	keys, ok := kindFields[kind]
	if !ok {
		return Def{}, fmt.Errorf("pins: unknown kind %q", kind)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(def, &members); err != nil {
		return Def{}, fmt.Errorf("%s %s: definition: %w", kind, name, err)
	}
	d := Def{Kind: kind, Name: name}
	for _, k := range keys {
		raw, ok := members[k]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		v, err := CanonicalJSON(raw)
		if err != nil {
			return Def{}, fmt.Errorf("%s %s: %s: %w", kind, name, k, err)
		}
		d.Fields = append(d.Fields, Field{k, string(v)})
	}
	d.Fields = append(d.Fields, Field{fieldName, quote(childName)}, Field{fieldServer, quote(alias)})
	slices.SortFunc(d.Fields, func(a, b Field) int { return compareStrings(a.Key, b.Key) })
	return d, nil
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

// ChildName is the server's own name for d.
func (d Def) ChildName() string { return unquote(d.Field(fieldName)) }

// Digest is "sha256:" and the hex SHA-256 of d's fields as one canonical
// JSON object. Two definitions have the same digest exactly when their
// canonical fields are equal, whatever their key order or whitespace.
func (d Def) Digest() string {
	h := sha256.New()
	h.Write([]byte{'{'})
	for i, f := range d.Fields {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write([]byte(quote(f.Key)))
		h.Write([]byte{':'})
		h.Write([]byte(f.Value))
	}
	h.Write([]byte{'}'})
	return digestPrefix + hex.EncodeToString(h.Sum(nil))
}

const digestPrefix = "sha256:"

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

// CanonicalJSON returns raw, one JSON value, in canonical form: no
// whitespace, object keys sorted by their UTF-16 code units (as RFC 8785
// does), strings re-escaped minimally, and numbers exactly as written (never
// through float64, so 12345678901234567890 stays as it is, and 1.0 and 1
// differ).
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	var b bytes.Buffer
	writeCanonical(&b, v)
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(string(v))
	case string:
		writeString(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareStrings)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCanonical(b, v[k])
		}
		b.WriteByte('}')
	}
}

// compareStrings orders by UTF-16 code units, as JavaScript sorts and RFC
// 8785 specifies, so that a key's place does not depend on the language
// that reads the file.
func compareStrings(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] == rb[i] {
			continue
		}
		ua, ub := utf16Key(ra[i]), utf16Key(rb[i])
		if ua != ub {
			return int(ua) - int(ub)
		}
		return int(ra[i]) - int(rb[i])
	}
	return len(ra) - len(rb)
}

// utf16Key is the first UTF-16 code unit of r.
func utf16Key(r rune) uint16 {
	if r >= 0x10000 {
		return uint16(0xD800 + ((r - 0x10000) >> 10))
	}
	return uint16(r)
}

// writeString writes s as a JSON string, escaping only what JSON requires.
func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func quote(s string) string {
	var b bytes.Buffer
	writeString(&b, s)
	return b.String()
}

func unquote(v string) string {
	var s string
	_ = json.Unmarshal([]byte(v), &s)
	return s
}
