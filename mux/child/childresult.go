package child

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// checkCallResult reports whether raw, a child's tools/call result as its
// transport decoded it (valid JSON), is one a client can read, as
// mcp.ParseCallToolResult decides, and the result's isError. The common
// shape (text contents, isError, structuredContent) is recognised by one
// scan without decoding; anything else is left to mcp-go's parser, so that
// exactly what it refuses is refused.
func checkCallResult(raw json.RawMessage) (isError bool, err error) {
	if isError, ok := plainCallResult(raw); ok {
		return isError, nil
	}
	parsed, err := mcp.ParseCallToolResult(&raw)
	if err != nil {
		return false, fmt.Errorf("%w: %v", ErrMalformedResult, err)
	}
	return parsed.IsError, nil
}

// callResultFields are the members mcp-go's CallToolResult decoder reads;
// encoding/json matches them ignoring case.
var callResultFields = [...]string{"_meta", "resultType", "content", "structuredContent", "isError", "inputRequests", "requestState"}

// plainCallResult recognises a result that mcp.ParseCallToolResult is sure
// to accept: an object whose members are content (an array of objects with
// exactly "type":"text" and a string "text"), optionally isError (true or
// false) and structuredContent (any value whose numbers fit a float64),
// each once, and members no field of mcp-go's matches. ok is false for
// anything else, which is not necessarily malformed. raw must be valid
// JSON.
func plainCallResult(raw []byte) (isError, ok bool) {
	top, ok := jsonwire.Members(raw)
	if !ok {
		return false, false
	}
	var content *jsonwire.Member
	for i := range top.Members {
		m := &top.Members[i]
		switch m.Key {
		case "content":
			content = m
		case "isError":
			switch string(raw[m.Start:m.End]) {
			case "true":
				isError = true
			case "false":
			default:
				return false, false
			}
		case "structuredContent":
			if !jsonwire.NumbersFit(raw[m.Start:m.End]) {
				return false, false
			}
		default:
			for _, f := range callResultFields {
				if strings.EqualFold(m.Key, f) {
					return false, false
				}
			}
			continue
		}
		for _, o := range top.Members[:i] { // a known member twice, in any case
			if strings.EqualFold(o.Key, m.Key) {
				return false, false
			}
		}
	}
	if content == nil || !textContents(raw[content.Start:content.End]) {
		return false, false
	}
	return isError, true
}

var textType = []byte(`"text"`)

// textContents reports whether b, valid JSON, is an array of objects each
// with exactly the members "type":"text" and "text" (a string).
func textContents(b []byte) bool {
	if len(b) == 0 || b[0] != '[' {
		return false
	}
	i := jsonwire.SkipSpace(b, 1)
	if i < len(b) && b[i] == ']' {
		return true
	}
	for i < len(b) {
		o, ok := jsonwire.Members(b[i:])
		if !ok || !textContent(b[i:], o) {
			return false
		}
		i = jsonwire.SkipSpace(b, i+o.Close+1)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = jsonwire.SkipSpace(b, i+1)
		case ']':
			return true
		default:
			return false
		}
	}
	return false
}

// textContent reports whether o, the members of the object b opens with,
// are exactly "type":"text" and "text" (a string).
func textContent(b []byte, o jsonwire.Object) bool {
	if len(o.Members) != 2 {
		return false
	}
	var typ, text bool
	for _, m := range o.Members {
		v := b[m.Start:m.End]
		switch m.Key {
		case "type":
			typ = bytes.Equal(v, textType)
		case "text":
			text = v[0] == '"'
		}
	}
	return typ && text
}
