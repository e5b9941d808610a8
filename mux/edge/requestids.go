package edge

// Request ids at the edge. mcp-go decodes a request's id into an any, so
// it takes an object, an array or a boolean, holds a number as a float64
// (a 30-digit id comes back rounded, in exponent form, and two ids a
// float64 cannot tell apart are one to its cancellation table), and treats
// a request with "id": null as a notification, never answered. Each edge
// (stdio.go, http.go) reads a client's message before mcp-go does:
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

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// idKind is what the edge makes of a message's id.
type idKind uint8

const (
	idPass    idKind = iota // not a request the edge checks: mcp-go gets it as it is
	idRequest               // a request with a string or a number id
	idBadType               // a request whose id is an object, an array or a boolean
	idNull                  // a request whose id is null
)

// The texts of the edge's refusals (-32600) of a request for its id: one
// that is not a string or a number, one that is null, one already in
// flight on the session.
const (
	BadIDText  = "invalid request: the id must be a string or a number"
	NullIDText = "invalid request: a request's id must not be null"
	DupIDText  = "invalid request: a request with this id is already in flight on this session"
)

// msgID is a client message's id as the edge reads it.
type msgID struct {
	kind idKind
	// at is the id's value: the last member named id in any case, the one
	// mcp-go keeps; set for every kind but a message without a string or
	// number id.
	at jsonwire.Member
	// dup is the id's value in one form for the in-flight check: ids equal
	// as JSON values, however written (7 and 7.0, "x" and "\u0078"), have
	// the same dup. For an id that is not carried it is the id as written,
	// the key jsonwire.AnswerIDKey gives it, and is left for dupOf to make.
	dup string
	// top is the message's top level, when it is a valid JSON object.
	top   jsonwire.Object
	valid bool
	// carried says mcp-go would not write the id back as the client wrote
	// it: it is handed a stand-in where it answers the message.
	carried bool
}

// readMsgID reads msg's id as mcp-go will decode it (members matched in
// any case, the last of duplicates winning).
func readMsgID(msg []byte) msgID {
	if !jsonwire.Valid(msg) {
		return msgID{} // mcp-go refuses it as unreadable
	}
	top, ok := jsonwire.Members(msg)
	v := msgID{top: top, valid: ok}
	if ok {
		v.readID(msg)
	}
	return v
}

// requestID is requestID(msg) from what readMsgID read of msg.
func (v *msgID) requestID(msg []byte) (string, bool) {
	if !v.valid {
		return "", false
	}
	return requestIDIn(msg, v.top)
}

// dupOf returns v.dup, made from msg for an id that is not carried.
func (v *msgID) dupOf(msg []byte) string {
	if v.dup == "" && v.kind == idRequest {
		return string(msg[v.at.Start:v.at.End])
	}
	return v.dup
}

// readID sets v from msg's id, reading its top level, v.top.
func (v *msgID) readID(msg []byte) {
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
			v.at = *id
			v.carried = !jsonwire.PlainInteger(val) && !jsonwire.PlainIDJSON(val)
		}
		return
	}
	switch val[0] {
	case 'n':
		if method == nil || notificationMethod(msg[method.Start:method.End]) {
			return
		}
		v.kind, v.at = idNull, *id
		return
	case '{', '[', 't', 'f':
		v.kind, v.at = idBadType, *id
		return
	}
	v.kind, v.at = idRequest, *id
	if !jsonwire.PlainInteger(val) && !jsonwire.PlainIDJSON(val) {
		v.dup, v.carried = idDupKey(val)
	}
}

// notificationMethod reports whether v, a method's JSON value, names a
// notification.
func notificationMethod(v []byte) bool {
	s, ok := wireString(v)
	return ok && bytes.HasPrefix(s, []byte("notifications/"))
}

// idDupKey is msgID.dup of v, a string or number id as written; carried
// says whether mcp-go would write it back otherwise: a number other than
// an unsigned integer of at most 15 digits, or a string with an escape or
// a character encoding/json escapes or that is not printable ASCII.
func idDupKey(v []byte) (dup string, carried bool) {
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

// standIn is the id mcp-go is handed for the carried request numbered n
// (from 1): a negative integer, which mcp-go writes back as it is and which
// no id of the client's reaches mcp-go as (the client's negative ids are
// carried too).
func standIn(n int64) []byte {
	return strconv.AppendInt(nil, -n, 10)
}

// idRefusal is the edge's -32600 answer under id (its JSON, as written)
// saying text, with the newline that ends a message.
func idRefusal(id []byte, text string) []byte {
	return frame.ErrorAnswer(id, &frame.Error{Code: mcp.INVALID_REQUEST, Message: text})
}

// cancelTarget returns where the id a client's notifications/cancelled
// names sits in msg, as mcp-go reads it (params.requestId, members matched
// in any case, the last winning), and false for any other message.
func cancelTarget(msg []byte) (jsonwire.Member, bool) {
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
