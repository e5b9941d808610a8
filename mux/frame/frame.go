// Package frame reads the JSON-RPC messages a client sends, once each, as
// mcpmux acts on them, and writes the messages mcpmux answers with.
//
// It is the one place where mcpmux decides what a client's message says:
// its kind, its id as the client wrote it, its method and params, what
// its _meta declares (the progress token, and for a 2026-07-28 request its
// protocol version, client, capabilities and log level) and the members of
// the requests mcpmux answers itself. Members are matched exactly, as JSON
// and MCP name them. A message whose reading could differ between mcpmux
// and a decoder that matches names ignoring case (encoding/json, which
// mcp-go decodes with), because it spells a member of the protocol in
// another case or gives one twice, is refused rather than guessed at: what
// mcpmux checks must be what reaches the child.
//
// Its tests run a real mcp-go server beside it on the same messages, so
// that they fail the day mcp-go reads a request otherwise.
package frame

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// Kind is what a message is.
type Kind uint8

const (
	// Other is anything but the kinds below: not JSON, not one object (a
	// batch), another JSON-RPC version, neither a method nor an answer.
	// mcpmux acts on none of them itself.
	Other Kind = iota
	// Request has a method and an id (a string or a number).
	Request
	// Notification has a method and no id.
	Notification
	// Response has an id, a result or an error, and no method: the
	// client's answer to a request sent to it.
	Response
)

// Frame is one message from a client as mcpmux reads it. Its byte fields
// are slices of the message it was read from.
type Frame struct {
	// Raw is the message as it was read.
	Raw  []byte
	Kind Kind
	// ID is the id as the client wrote it (a request's or a response's);
	// nil for a notification.
	ID     []byte
	Method string
	// Params is the params value as written; nil when absent or null.
	Params []byte
	// Result and Error are a response's.
	Result, Error []byte
	// Refused, when not nil, is why the message may not be acted on, to
	// be answered under a null id unless it is a notification: a request
	// whose id is of no type JSON-RPC allows, or null (Kind is Other); a
	// message that spells a member of JSON-RPC's in another case or gives
	// one twice, which decoders would read differently (Kind is what the
	// message would be).
	Refused *Error
}

// The texts of the refusals of Read (-32600, under a null id).
const (
	BadIDText  = "invalid request: the id must be a string or a number"
	NullIDText = "invalid request: a request's id must not be null"
)

// topMembers are the members of a JSON-RPC message.
var topMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// Read reads msg, one message from a client. It never fails: what mcpmux
// cannot act on is of kind Other, and Refused says what is wrong with it
// when mcpmux refuses it itself.
func Read(msg []byte) (f Frame) {
	if !jsonwire.Valid(msg) {
		return f
	}
	top, ok := jsonwire.Members(msg)
	if !ok {
		return f
	}
	var version, method []byte
	var hasID, hasMethod, idLike bool
	ambiguous := ""
	for i := range top.Members {
		m := &top.Members[i]
		v := msg[m.Start:m.End]
		idLike = idLike || strings.EqualFold(m.Key, "id")
		known := false
		for _, k := range topMembers {
			if m.Key == k {
				known = true
			} else if ambiguous == "" && strings.EqualFold(m.Key, k) {
				ambiguous = "the member " + quote(m.Key) + " is " + quote(k) + " in another case"
			}
		}
		if !known {
			continue
		}
		if ambiguous == "" && top.Only(m.Key) == nil {
			ambiguous = "the member " + quote(m.Key) + " is given twice"
		}
		switch m.Key {
		case "jsonrpc":
			version = v
		case "id":
			hasID, f.ID = true, v
		case "method":
			hasMethod, method = true, v
		case "params":
			if string(v) != "null" {
				f.Params = v
			}
		case "result":
			f.Result = v
		case "error":
			f.Error = v
		}
	}
	f.Raw = msg
	defer func() {
		if ambiguous != "" {
			f = Frame{Kind: f.Kind, Refused: &Error{Code: mcp.INVALID_REQUEST, Message: "invalid request: " + ambiguous}}
		}
	}()
	if s, ok := stringValue(version); !ok || s != mcp.JSONRPC_VERSION {
		return Frame{}
	}
	if hasMethod {
		s, ok := stringValue(method)
		if !ok {
			return Frame{}
		}
		f.Method = s
	}
	switch {
	case ambiguous != "" && hasMethod && !idLike:
		f.Kind = Notification
	case ambiguous != "" && hasMethod:
		f.Kind = Request
	case ambiguous != "":
	case hasMethod && (!hasID || string(f.ID) == "null" && strings.HasPrefix(f.Method, "notifications/")):
		// A notification that carries "id": null is still one.
		f.Kind, f.ID = Notification, nil
	case hasMethod && string(f.ID) == "null":
		return Frame{Refused: &Error{Code: mcp.INVALID_REQUEST, Message: NullIDText}}
	case hasMethod && !validID(f.ID):
		return Frame{Refused: &Error{Code: mcp.INVALID_REQUEST, Message: BadIDText}}
	case hasMethod:
		f.Kind = Request
	case validID(f.ID) && (f.Result != nil || f.Error != nil):
		f.Kind = Response
	default:
		return Frame{}
	}
	return f
}

// validID reports whether v, a valid JSON value, is an id JSON-RPC allows:
// a string or a number.
func validID(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	c := v[0]
	return c == '"' || c == '-' || c >= '0' && c <= '9'
}

// stringValue decodes v, a valid JSON value, when it is a string, as
// encoding/json (and so mcp-go) does: a string without escapes, all of it
// UTF-8, is v's own bytes; a byte that is not UTF-8 reads as U+FFFD.
func stringValue(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if inner := v[1 : len(v)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// OversizedHead is how much of a line over the size limit is kept to find
// its id.
const OversizedHead = 16 << 10
