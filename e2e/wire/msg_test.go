package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// msg is one JSON-RPC message as it came over the wire, with its top
// level read. A line that is not a JSON object has only raw.
type msg struct {
	raw    []byte
	id     json.RawMessage // nil when absent
	method string
	result json.RawMessage
	err    json.RawMessage
}

func parseMsg(raw []byte) *msg {
	m := &msg{raw: raw}
	var top struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &top) == nil {
		m.id, m.method, m.result, m.err = top.ID, top.Method, top.Result, top.Error
	}
	return m
}

// isAnswer reports whether m answers a request: a result or an error.
func (m *msg) isAnswer() bool { return m.method == "" && (m.result != nil || m.err != nil) }

// isRequest reports whether m is a request (it has a method and an id).
func (m *msg) isRequest() bool { return m.method != "" && m.id != nil }

// answers reports whether m is the answer to a request of id (JSON, as the
// request wrote it): the same JSON value, however escaped or, for a
// number, written (the transcript has the bytes).
func (m *msg) answers(id json.RawMessage) bool {
	return m.isAnswer() && sameJSON(m.id, id)
}

func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

func decodeJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v) == nil
}

// at returns the value at path (members of nested objects) in m, or nil.
func (m *msg) at(path string) any {
	v, ok := decodeJSON(m.raw)
	if !ok {
		return nil
	}
	for _, k := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}

// keys returns the member names of the object at path, sorted.
func (m *msg) keys(path string) []string {
	obj, _ := m.at(path).(map[string]any)
	return slices.Sorted(maps.Keys(obj))
}

// get returns the string (or number) at path in m, or "".
func (m *msg) get(path string) string {
	switch v := m.at(path).(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

// idOf returns the id member of a message's JSON, or nil.
func idOf(line string) json.RawMessage {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal([]byte(line), &head) != nil {
		return nil
	}
	return head.ID
}
