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
	"slices"
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
