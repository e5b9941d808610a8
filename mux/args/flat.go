package args

import (
	"encoding/json"
	"math"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// flatSchema is an inputSchema simple enough to accept arguments without
// the validator: an object schema of type, properties, required and a
// boolean additionalProperties, whose properties have at most a type (one
// of JSON's seven) and annotations. It only ever accepts: arguments it
// cannot accept are handed to the validator, which says why they fail (or
// accepts them after all), so that every answer reads as the validator's.
type flatSchema struct {
	props   map[string]string // property -> its type ("" for any)
	require []string
	closed  bool // additionalProperties is false
}

// annotation reports keywords that never fail a value.
func annotation(kw string) bool {
	switch kw {
	case "description", "title", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment":
		return true
	}
	return false
}

// readFlatSchema returns raw as a flatSchema, or nil if it is not one.
func readFlatSchema(raw []byte) *flatSchema {
	top, ok := uniqueMembers(raw)
	if !ok {
		return nil
	}
	f := &flatSchema{props: map[string]string{}}
	for kw, v := range top {
		switch {
		case kw == "type":
			var t string
			if v[0] != '"' || json.Unmarshal(v, &t) != nil || t != "object" {
				return nil
			}
		case kw == "properties":
			props, ok := uniqueMembers(v)
			if !ok {
				return nil
			}
			for name, p := range props {
				t, ok := flatProperty(p)
				if !ok {
					return nil
				}
				f.props[name] = t
			}
		case kw == "required":
			if v[0] != '[' || json.Unmarshal(v, &f.require) != nil {
				return nil
			}
		case kw == "additionalProperties":
			var open bool
			if (v[0] != 't' && v[0] != 'f') || json.Unmarshal(v, &open) != nil {
				return nil
			}
			f.closed = !open
		case !annotation(kw):
			return nil
		}
	}
	if _, typed := top["type"]; !typed {
		return nil
	}
	return f
}

// flatProperty reads a property's schema: its type ("" for none), and
// whether it is one a flatSchema holds.
func flatProperty(raw json.RawMessage) (string, bool) {
	s, ok := uniqueMembers(raw)
	if !ok {
		return "", false // true and false schemas, and anything else, go to the validator
	}
	typ := ""
	for kw, v := range s {
		switch {
		case kw == "type":
			if v[0] != '"' || json.Unmarshal(v, &typ) != nil {
				return "", false // null is no type name
			}
			switch typ {
			case "string", "number", "integer", "boolean", "object", "array", "null":
			default:
				return "", false
			}
		case !annotation(kw):
			return "", false
		}
	}
	return typ, true
}

// accepts reports whether args, as Decode decodes them, surely fit f.
func (f *flatSchema) accepts(args map[string]any) bool {
	for _, name := range f.require {
		if _, ok := args[name]; !ok {
			return false
		}
	}
	for name, v := range args {
		t, ok := f.props[name]
		if !ok {
			if f.closed {
				return false
			}
			continue
		}
		if !hasType(v, t) {
			return false
		}
	}
	return true
}

// hasType reports whether v, a value as encoding/json decodes it into an
// any, is of JSON Schema type t ("" for any).
func hasType(v any, t string) bool {
	switch t {
	case "":
		return true
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		n, ok := v.(float64)
		return ok && !math.IsInf(n, 0) && !math.IsNaN(n)
	case "integer":
		n, ok := v.(float64)
		return ok && !math.IsInf(n, 0) && n == math.Trunc(n)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "null":
		return v == nil
	}
	return false
}

// uniqueMembers returns the members of raw, a JSON object none of whose
// keys appears twice (a schema whose parsers could read it two ways is the
// validator's to judge).
func uniqueMembers(raw []byte) (map[string]json.RawMessage, bool) {
	if !jsonwire.Valid(raw) {
		return nil, false
	}
	o, ok := jsonwire.Members(raw)
	if !ok {
		return nil, false
	}
	m := make(map[string]json.RawMessage, len(o.Members))
	for _, mem := range o.Members {
		if _, dup := m[mem.Key]; dup {
			return nil, false
		}
		m[mem.Key] = raw[mem.Start:mem.End]
	}
	return m, true
}
