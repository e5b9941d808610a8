package mux

import (
	"encoding/json"
	"errors"
)

// errNotObject is the error for JSON that is not one object.
var errNotObject = errors.New("not a JSON object")

// withField returns the valid JSON object raw with member key set to value:
// replaced in place if present (its first occurrence), added at the end if
// not. Every other byte stays as it was.
func withField(raw []byte, key string, value []byte) ([]byte, error) {
	o, ok := members(raw)
	if !ok {
		return nil, errNotObject
	}
	for _, f := range o.m {
		if f.key == key {
			out := make([]byte, 0, len(raw)-(f.end-f.start)+len(value))
			out = append(out, raw[:f.start]...)
			out = append(out, value...)
			return append(out, raw[f.end:]...), nil
		}
	}
	k, _ := json.Marshal(key)
	out := make([]byte, 0, len(raw)+len(k)+len(value)+2)
	out = append(out, raw[:o.close]...)
	if len(o.m) > 0 {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, raw[o.close:]...), nil
}

// withoutField returns the valid JSON object raw without member key (every
// occurrence); the other members keep their bytes.
func withoutField(raw []byte, key string) ([]byte, error) {
	o, ok := members(raw)
	if !ok {
		return nil, errNotObject
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	for _, f := range o.m {
		if f.key == key {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, raw[f.keyStart:f.end]...)
	}
	return append(out, '}'), nil
}
