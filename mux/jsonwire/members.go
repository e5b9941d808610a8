// Package jsonwire reads and edits JSON without decoding it: the members of
// an object as offsets into its bytes, a validity check as strict as
// json.Valid with no allocation, edits of one member that keep every other
// byte, and JSON-RPC ids in the canonical forms the upstream edge compares
// them in. Everything here works on bytes alone; nothing holds state.
package jsonwire

import (
	"bytes"
	"encoding/json"
)

// Member is one key and value of a JSON object, as offsets into the bytes
// the object was read from.
type Member struct {
	Key        string // decoded
	KeyStart   int    // the key's opening quote
	Start, End int    // the value
}

// Object is a JSON object's members in the order written, and the offset
// of its closing brace.
type Object struct {
	Members []Member
	Close   int
}

// Only returns the member named key, or nil if there is none or more than
// one.
func (o Object) Only(key string) *Member {
	var found *Member
	for i := range o.Members {
		if o.Members[i].Key == key {
			if found != nil {
				return nil
			}
			found = &o.Members[i]
		}
	}
	return found
}

// Last returns the last member named key (the one a JSON decoder keeps), or
// nil.
func (o Object) Last(key string) *Member {
	for i := len(o.Members) - 1; i >= 0; i-- {
		if o.Members[i].Key == key {
			return &o.Members[i]
		}
	}
	return nil
}

// Members reads the top level of b, which must be valid JSON (json.Valid),
// and reports whether it is an object. Values are skipped, not decoded;
// offsets are b's.
func Members(b []byte) (Object, bool) {
	var o Object
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return o, false
	}
	o.Members = make([]Member, 0, 6) // one allocation for the objects of a message
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		o.Close = i
		return o, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return o, false
		}
		keyEnd := SkipString(b, i)
		if keyEnd < 0 {
			return o, false
		}
		key, ok := decodeKey(b[i:keyEnd])
		if !ok {
			return o, false
		}
		j := SkipSpace(b, keyEnd)
		if j >= len(b) || b[j] != ':' {
			return o, false
		}
		start := SkipSpace(b, j+1)
		end := SkipValue(b, start)
		if end < 0 {
			return o, false
		}
		o.Members = append(o.Members, Member{Key: key, KeyStart: i, Start: start, End: end})
		i = SkipSpace(b, end)
		if i >= len(b) {
			return o, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			o.Close = i
			return o, true
		default:
			return o, false
		}
	}
	return o, false
}

// decodeKey decodes a JSON string, sparing the allocation-free common case
// of one without escapes the decoder.
func decodeKey(s []byte) (string, bool) {
	if bytes.IndexByte(s, '\\') < 0 {
		return knownKey(s[1 : len(s)-1]), true
	}
	var k string
	return k, json.Unmarshal(s, &k) == nil
}

// knownKey is string(k), without allocating for the keys the call path
// reads on every message.
func knownKey(k []byte) string {
	switch string(k) {
	case "jsonrpc":
		return "jsonrpc"
	case "id":
		return "id"
	case "method":
		return "method"
	case "result":
		return "result"
	case "error":
		return "error"
	case "params":
		return "params"
	case "_meta":
		return "_meta"
	case "content":
		return "content"
	case "type":
		return "type"
	case "text":
		return "text"
	case "isError":
		return "isError"
	case "structuredContent":
		return "structuredContent"
	case "resultType":
		return "resultType"
	}
	return string(k)
}

// SkipSpace returns the offset of the first byte from b[i] on that is not
// JSON white space, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipString returns the offset just past the string that opens at b[i],
// or -1.
func SkipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		i += q
		// The quote ends the string unless an odd number of backslashes
		// escape it; the opening quote stops the count.
		k := i - 1
		for b[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1
		}
	}
	return -1
}

// SkipValue returns the offset just past the value that starts at b[i], or
// -1.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				if i = SkipString(b, i); i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
