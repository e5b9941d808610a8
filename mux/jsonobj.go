package mux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// objectField is where one top-level member of a JSON object lies in its
// bytes: value is raw[start:end].
type objectField struct {
	key      string
	keyStart int // where the quoted key begins
	start    int
	end      int
}

// objectFields returns the top-level members of the JSON object raw, in
// order, with the byte range of each value, so that a value can be replaced
// without re-encoding anything else.
func objectFields(raw []byte) ([]objectField, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var fields []objectField
	for dec.More() {
		keyStart := int(dec.InputOffset())
		for keyStart < len(raw) && (raw[keyStart] == ',' || isSpace(raw[keyStart])) {
			keyStart++
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		// InputOffset is just past the key; the value starts after the ':'.
		after := int(dec.InputOffset())
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		if start < after {
			return nil, fmt.Errorf("member %q: value out of place", key)
		}
		fields = append(fields, objectField{key: key, keyStart: keyStart, start: start, end: end})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return fields, nil
}

// withField returns the object raw with member key set to value: replaced
// in place if present (its first occurrence), added at the end if not. Every
// other byte stays as it was.
func withField(raw []byte, key string, value []byte) ([]byte, error) {
	fields, err := objectFields(raw)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		if f.key == key {
			out := make([]byte, 0, len(raw)-(f.end-f.start)+len(value))
			out = append(out, raw[:f.start]...)
			out = append(out, value...)
			return append(out, raw[f.end:]...), nil
		}
	}
	end := bytes.LastIndexByte(raw, '}')
	k, _ := json.Marshal(key)
	out := make([]byte, 0, len(raw)+len(k)+len(value)+2)
	out = append(out, bytes.TrimRight(raw[:end], " \t\r\n")...)
	if len(fields) > 0 {
		out = append(out, ',')
	}
	out = append(out, k...)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, raw[end:]...), nil
}

// withoutField returns the object raw without member key (every
// occurrence); the other members keep their bytes.
func withoutField(raw []byte, key string) ([]byte, error) {
	fields, err := objectFields(raw)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	for _, f := range fields {
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

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
