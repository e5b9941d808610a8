// Package reqid reads the ids of a client's messages as an edge must
// before mcp-go sees them. mcp-go decodes a request's id into an any, so
// it takes an object, an array or a boolean, holds a number as a float64
// (a 30-digit id comes back rounded, in exponent form, and two ids a
// float64 cannot tell apart are one to its cancellation table), and treats
// a request with "id": null as a notification, never answered. Each edge
// (mux/edge's stdio and HTTP) reads a client's message before mcp-go does:
//
//   - a request whose id is not a string or a number is refused with
//     -32600 under a null id, as is a request's null id (a method under
//     notifications/ with a null id stays a notification, as mcp-go takes
//     it);
//   - a number other than a small unsigned integer, and a string that
//     encoding/json would write back otherwise, is carried: mcp-go is
//     handed the request under a stand-in id of the edge's (a negative
//     integer, which no id of the client's reaches mcp-go as), and the
//     answer gets the client's id back, byte for byte; a cancellation
//     naming the client's id is handed on naming the stand-in;
//   - a request whose id is that of a request of the same session still in
//     flight is refused with -32600 under its id; the first goes on.
//
// The client's answers to mcpmux's requests (no method, a result or an
// error) and notifications (no id) are never refused. (mcp-go answers an
// error from the client with an error of its own, under its id: stdio
// carries such an id too.)
package reqid

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// Kind is what the edge makes of a message's id.
type Kind uint8

const (
	Pass    Kind = iota // not a request the edge checks: mcp-go gets it as it is
	Request             // a request with a string or a number id
	BadType             // a request whose id is an object, an array or a boolean
	Null                // a request whose id is null
)

// The texts of the edge's refusals (-32600) of a request for its id: one
// that is not a string or a number, one that is null, one already in
// flight on the session.
const (
	BadIDText  = "invalid request: the id must be a string or a number"
	NullIDText = "invalid request: a request's id must not be null"
	DupIDText  = "invalid request: a request with this id is already in flight on this session"
)

// ID is a client message's id as the edge reads it.
type ID struct {
	Kind Kind
	// at is the id's value: the last member named id in any case, the one
	// mcp-go keeps; set for every kind but a message without a string or
	// number id.
	At jsonwire.Member
	// dup is the id's value in one form for the in-flight check: ids equal
	// as JSON values, however written (7 and 7.0, "x" and "\u0078"), have
	// the same dup. For an id that is not carried it is the id as written,
	// the key jsonwire.AnswerIDKey gives it, and is left for DupOf to make.
	Dup string
	// top is the message's top level, when it is a valid JSON object.
	top   jsonwire.Object
	valid bool
	// carried says mcp-go would not write the id back as the client wrote
	// it: it is handed a stand-in where it answers the message.
	Carried bool
}

// Read reads msg's id as mcp-go will decode it (members matched in
// any case, the last of duplicates winning).
func Read(msg []byte) ID {
	if !jsonwire.Valid(msg) {
		return ID{} // mcp-go refuses it as unreadable
	}
	top, ok := jsonwire.Members(msg)
	v := ID{top: top, valid: ok}
	if ok {
		v.readID(msg)
	}
	return v
}

// requestID is requestID(msg) from what Read read of msg.
func (v *ID) RequestID(msg []byte) (string, bool) {
	if !v.valid {
		return "", false
	}
	return requestIDIn(msg, v.top)
}

// DupOf returns v.Dup, made from msg for an id that is not carried.
func (v *ID) DupOf(msg []byte) string {
	if v.Dup == "" && v.Kind == Request {
		return string(msg[v.At.Start:v.At.End])
	}
	return v.Dup
}

// readID sets v from msg's id, reading its top level, v.top.
func (v *ID) readID(msg []byte) {
	top := v.top
	var id, method, result, fault *jsonwire.Member
	for i := range top.Members {
		m := &top.Members[i]
		switch {
		case strings.EqualFold(m.Key, "id"):
			id = m
		case strings.EqualFold(m.Key, "method"):
			method = m
		case strings.EqualFold(m.Key, "result"):
			result = m
		case strings.EqualFold(m.Key, "error"):
			fault = m
		}
	}
	if id == nil {
		return // a notification
	}
	val := msg[id.Start:id.End]
	given := func(m *jsonwire.Member) bool { return m != nil && string(msg[m.Start:m.End]) != "null" }
	if method == nil && (given(result) || given(fault)) {
		// The client's answer. mcp-go answers one with an error, under
		// its id, so a number or string in it is carried all the same:
		// only stand-ins may reach mcp-go as negative numbers.
		if c := val[0]; c == '"' || c == '-' || c >= '0' && c <= '9' {
			v.At = *id
			v.Carried = !jsonwire.PlainInteger(val) && !jsonwire.PlainIDJSON(val)
		}
		return
	}
	switch val[0] {
	case 'n':
		if method == nil || notificationMethod(msg[method.Start:method.End]) {
			return
		}
		v.Kind, v.At = Null, *id
		return
	case '{', '[', 't', 'f':
		v.Kind, v.At = BadType, *id
		return
	}
	v.Kind, v.At = Request, *id
	if !jsonwire.PlainInteger(val) && !jsonwire.PlainIDJSON(val) {
		v.Dup, v.Carried = DupKey(val)
	}
}

// notificationMethod reports whether v, a method's JSON value, names a
// notification.
func notificationMethod(v []byte) bool {
	s, ok := wireString(v)
	return ok && bytes.HasPrefix(s, []byte("notifications/"))
}

// DupKey is ID.dup of v, a string or number id as written; carried
// says whether mcp-go would write it back otherwise: a number other than
// an unsigned integer of at most 15 digits, or a string with an escape or
// a character encoding/json escapes or that is not printable ASCII.
func DupKey(v []byte) (dup string, carried bool) {
	switch {
	case jsonwire.PlainInteger(v):
		return string(v), false // what jsonwire.AnswerIDKey and NumberKey make of it
	case jsonwire.PlainIDJSON(v):
		return string(v), false // what jsonwire.AnswerIDKey makes of it
	case v[0] == '"':
		k, _ := jsonwire.AnswerIDKey(v)
		return k, true
	}
	return jsonwire.NumberKey(v), true
}

// StandIn is the id mcp-go is handed for the carried request numbered n
// (from 1): a negative integer, which mcp-go writes back as it is and which
// no id of the client's reaches mcp-go as (the client's negative ids are
// carried too).
func StandIn(n int64) []byte {
	return strconv.AppendInt(nil, -n, 10)
}

// Refusal is the edge's -32600 answer under id (its JSON, as written)
// saying text, with the newline that ends a message.
func Refusal(id []byte, text string) []byte {
	return frame.ErrorAnswer(id, &frame.Error{Code: mcp.INVALID_REQUEST, Message: text})
}

// CancelTarget returns where the id a client's notifications/cancelled
// names sits in msg, as mcp-go reads it (params.requestId, members matched
// in any case, the last winning), and false for any other message.
func CancelTarget(msg []byte) (jsonwire.Member, bool) {
	if !bytes.Contains(msg, []byte(mcp.MethodNotificationCancelled)) || !jsonwire.Valid(msg) {
		return jsonwire.Member{}, false
	}
	top, ok := jsonwire.Members(msg)
	if !ok {
		return jsonwire.Member{}, false
	}
	var params *jsonwire.Member
	cancel := false
	for i := range top.Members {
		m := &top.Members[i]
		v := msg[m.Start:m.End]
		switch {
		case strings.EqualFold(m.Key, "id"):
			if string(v) != "null" {
				return jsonwire.Member{}, false
			}
		case strings.EqualFold(m.Key, "method"):
			s, ok := wireString(v)
			cancel = ok && string(s) == string(mcp.MethodNotificationCancelled)
		case strings.EqualFold(m.Key, "params"):
			params = m
		}
	}
	if !cancel || params == nil {
		return jsonwire.Member{}, false
	}
	p, ok := jsonwire.Members(msg[params.Start:params.End])
	if !ok {
		return jsonwire.Member{}, false
	}
	var target *jsonwire.Member
	for i := range p.Members {
		if strings.EqualFold(p.Members[i].Key, "requestId") {
			target = &p.Members[i]
		}
	}
	if target == nil {
		return jsonwire.Member{}, false
	}
	at := *target
	at.KeyStart += params.Start
	at.Start += params.Start
	at.End += params.Start
	if c := msg[at.Start]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return jsonwire.Member{}, false
	}
	return at, true
}

// requestID returns the id, in canonical form, of a message mcp-go answers
// under its id, as HandleMessage decides: one it can decode into its types
// (a numeric jsonrpc or an id out of float64's range cannot be) with a
// non-null id, that is in another JSON-RPC version (refused under its id,
// method or not) or has no result (an error response from the client gets
// "method not found"; one with a result is taken for an answer to mcp-go).
// Notifications are not waited for, nor a subscriptions/listen stream,
// which stays open until the session ends. The fields are matched as mcp-go
// matches them (encoding/json: any case, as bytes.EqualFold, the last of
// duplicates), by one scan of the top level: only the id is decoded into a
// value, the rest is checked (strings for jsonrpc and method, numbers that
// fit a float64 in id and result).
func RequestID(line []byte) (string, bool) {
	if !jsonwire.Valid(line) {
		return "", false
	}
	top, ok := jsonwire.Members(line)
	if !ok {
		return "", false // null decodes without an id; anything else fails
	}
	return requestIDIn(line, top)
}

// requestIDIn is requestID of line, valid JSON, whose top level is top.
func requestIDIn(line []byte, top jsonwire.Object) (string, bool) {
	var jsonrpc, method, id []byte
	var ok bool
	result := false
	for _, m := range top.Members {
		v := line[m.Start:m.End]
		switch {
		case strings.EqualFold(m.Key, "jsonrpc"):
			if jsonrpc, ok = wireString(v); !ok {
				return "", false
			}
		case strings.EqualFold(m.Key, "method"):
			if method, ok = wireString(v); !ok {
				return "", false
			}
		case strings.EqualFold(m.Key, "id"):
			if !jsonwire.NumbersFit(v) {
				return "", false
			}
			id = v
		case strings.EqualFold(m.Key, "result"):
			if !jsonwire.NumbersFit(v) {
				return "", false
			}
			result = string(v) != "null"
		}
	}
	if string(jsonrpc) == mcp.JSONRPC_VERSION && (result || string(method) == string(mcp.MethodSubscriptionsListen)) {
		return "", false
	}
	return jsonwire.AnswerIDKey(id)
}

// maxWireString is the longest raw JSON string that can still decode to
// "subscriptions/listen" (every character escaped as \uXXXX); a longer one
// is no name requestID compares with, and is not decoded.
const maxWireString = 6*len(mcp.MethodSubscriptionsListen) + 2

// wireString reads v, a valid JSON value, as encoding/json decodes it into
// mcp-go's string fields: a string or null (empty for null and for strings
// too long to matter); ok is false for anything else, which fails the whole
// message. A string without escapes comes back as v's own bytes.
func wireString(v []byte) (s []byte, ok bool) {
	switch {
	case string(v) == "null":
		return nil, true
	case v[0] != '"':
		return nil, false
	case len(v) > maxWireString:
		return nil, true
	case bytes.IndexByte(v, '\\') < 0:
		return v[1 : len(v)-1], true
	}
	var d string
	if json.Unmarshal(v, &d) != nil {
		return nil, false
	}
	return []byte(d), true
}
