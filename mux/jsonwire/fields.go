package jsonwire

import (
	"encoding/json"
	"errors"
)

// ErrNotObject is the error for JSON that is not one object.
var ErrNotObject = errors.New("not a JSON object")

// WithField returns the valid JSON object raw with member key set to value:
// replaced in place if present (its first occurrence), added at the end if
// not. Every other byte stays as it was.
func WithField(raw []byte, key string, value []byte) ([]byte, error) {
	o, ok := Members(raw)
	if !ok {
		return nil, ErrNotObject
	}
	for _, f := range o.Members {
		if f.Key == key {
			out := make([]byte, 0, len(raw)-(f.End-f.Start)+len(value))
			out = append(out, raw[:f.Start]...)
			out = append(out, value...)
			return append(out, raw[f.End:]...), nil
		}
	}
	k, _ := json.Marshal(key)
	out := make([]byte, 0, len(raw)+len(k)+len(value)+2)
	out = append(out, raw[:o.Close]...)
	if len(o.Members) > 0 {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, raw[o.Close:]...), nil
}

// WithoutField returns the valid JSON object raw without member key (every
// occurrence); the other members keep their bytes.
func WithoutField(raw []byte, key string) ([]byte, error) {
	o, ok := Members(raw)
	if !ok {
		return nil, ErrNotObject
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	for _, f := range o.Members {
		if f.Key == key {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, raw[f.KeyStart:f.End]...)
	}
	return append(out, '}'), nil
}

// WithValue returns msg with the value at m replaced by v, in a new slice.
func WithValue(msg []byte, m Member, v []byte) []byte {
	out := make([]byte, 0, len(msg)-(m.End-m.Start)+len(v))
	out = append(out, msg[:m.Start]...)
	out = append(out, v...)
	return append(out, msg[m.End:]...)
}
