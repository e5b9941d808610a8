package mux

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
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// idKind is what the edge makes of a message's id.
type idKind uint8

const (
	idPass    idKind = iota // not a request the edge checks: mcp-go gets it as it is
	idRequest               // a request with a string or a number id
	idBadType               // a request whose id is an object, an array or a boolean
	idNull                  // a request whose id is null
)

// The texts of the edge's refusals (-32600).
const (
	badIDText  = "invalid request: the id must be a string or a number"
	nullIDText = "invalid request: a request's id must not be null"
	dupIDText  = "invalid request: a request with this id is already in flight on this session"
)

// msgID is a client message's id as the edge reads it.
type msgID struct {
	kind idKind
	// at is the id's value: the last member named id in any case, the one
	// mcp-go keeps; set for every kind but a message without a string or
	// number id.
	at member
	// dup is the id's value in one form for the in-flight check: ids equal
	// as JSON values, however written (7 and 7.0, "x" and "\u0078"), have
	// the same dup. For an id that is not carried it is the id as written,
	// the key answerIDKey gives it, and is left for dupOf to make.
	dup string
	// top is the message's top level, when it is a valid JSON object.
	top   object
	valid bool
	// carried says mcp-go would not write the id back as the client wrote
	// it: it is handed a stand-in where it answers the message.
	carried bool
}

// readMsgID reads msg's id as mcp-go will decode it (members matched in
// any case, the last of duplicates winning).
func readMsgID(msg []byte) msgID {
	if !jsonValid(msg) {
		return msgID{} // mcp-go refuses it as unreadable
	}
	top, ok := members(msg)
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
		return string(msg[v.at.start:v.at.end])
	}
	return v.dup
}

// readID sets v from msg's id, reading its top level, v.top.
func (v *msgID) readID(msg []byte) {
	top := v.top
	var id, method, result, fault *member
	for i := range top.m {
		m := &top.m[i]
		switch {
		case strings.EqualFold(m.key, "id"):
			id = m
		case strings.EqualFold(m.key, "method"):
			method = m
		case strings.EqualFold(m.key, "result"):
			result = m
		case strings.EqualFold(m.key, "error"):
			fault = m
		}
	}
	if id == nil {
		return // a notification
	}
	val := msg[id.start:id.end]
	given := func(m *member) bool { return m != nil && string(msg[m.start:m.end]) != "null" }
	if method == nil && (given(result) || given(fault)) {
		// The client's answer. mcp-go answers one with an error, under
		// its id, so a number or string in it is carried all the same:
		// only stand-ins may reach mcp-go as negative numbers.
		if c := val[0]; c == '"' || c == '-' || c >= '0' && c <= '9' {
			v.at = *id
			v.carried = !plainInteger(val) && !plainIDJSON(val)
		}
		return
	}
	switch val[0] {
	case 'n':
		if method == nil || notificationMethod(msg[method.start:method.end]) {
			return
		}
		v.kind, v.at = idNull, *id
		return
	case '{', '[', 't', 'f':
		v.kind, v.at = idBadType, *id
		return
	}
	v.kind, v.at = idRequest, *id
	if !plainInteger(val) && !plainIDJSON(val) {
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
	case plainInteger(v):
		return string(v), false // what answerIDKey and numberKey make of it
	case plainIDJSON(v):
		return string(v), false // what answerIDKey makes of it
	case v[0] == '"':
		k, _ := answerIDKey(v)
		return k, true
	}
	return numberKey(v), true
}

// numberKey is the value of lit, a valid JSON number, in one form: equal
// numbers however written (100, 1E2, 100.0, 1000e-1) have the same key.
// An integer of at most 64 digits is its digits; anything else is its
// significant digits and a decimal exponent ("15e-1"). An exponent beyond
// what an int holds keeps lit as it is.
func numberKey(lit []byte) string {
	neg := lit[0] == '-'
	s := lit
	if neg {
		s = s[1:]
	}
	mant, exp := s, []byte(nil)
	if i := bytes.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	whole, frac := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		whole, frac = mant[:i], mant[i+1:]
	}
	e := 0
	if exp != nil {
		n, err := strconv.Atoi(string(exp))
		if err != nil || n > 1<<30 || n < -(1<<30) {
			return "#" + string(lit)
		}
		e = n
	}
	digits := make([]byte, 0, len(whole)+len(frac))
	digits = append(append(digits, whole...), frac...)
	e -= len(frac)
	digits = bytes.TrimLeft(digits, "0")
	if len(digits) == 0 {
		return "0"
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		e++
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.Write(digits)
	if e >= 0 && len(digits)+e <= 64 {
		b.WriteString(strings.Repeat("0", e))
		return b.String()
	}
	b.WriteByte('e')
	b.WriteString(strconv.Itoa(e))
	return b.String()
}

// standIn is the id mcp-go is handed for the carried request numbered n
// (from 1): a negative integer, which mcp-go writes back as it is and which
// no id of the client's reaches mcp-go as (the client's negative ids are
// carried too).
func standIn(n int64) []byte {
	return strconv.AppendInt(nil, -n, 10)
}

// withValue returns msg with the value at m replaced by v, in a new slice.
func withValue(msg []byte, m member, v []byte) []byte {
	out := make([]byte, 0, len(msg)-(m.end-m.start)+len(v))
	out = append(out, msg[:m.start]...)
	out = append(out, v...)
	return append(out, msg[m.end:]...)
}

// loggable is id as the log shows it: itself, or its size when it is long.
func loggable(id []byte) []byte {
	if len(id) <= 128 {
		return id
	}
	return strconv.AppendQuote(nil, "an id of "+strconv.Itoa(len(id))+" bytes")
}

// idRefusal is the edge's -32600 answer under id (its JSON, as written)
// saying text, with the newline that ends a message.
func idRefusal(id []byte, text string) []byte {
	t, _ := json.Marshal(text)
	msg := make([]byte, 0, 64+len(id)+len(t))
	msg = append(msg, answerHead...)
	msg = append(msg, id...)
	msg = append(msg, `,"error":{"code":`...)
	msg = strconv.AppendInt(msg, mcp.INVALID_REQUEST, 10)
	msg = append(msg, `,"message":`...)
	msg = append(msg, t...)
	return append(msg, "}}\n"...)
}

// cancelTarget returns where the id a client's notifications/cancelled
// names sits in msg, as mcp-go reads it (params.requestId, members matched
// in any case, the last winning), and false for any other message.
func cancelTarget(msg []byte) (member, bool) {
	if !bytes.Contains(msg, []byte(mcp.MethodNotificationCancelled)) || !jsonValid(msg) {
		return member{}, false
	}
	top, ok := members(msg)
	if !ok {
		return member{}, false
	}
	var params *member
	cancel := false
	for i := range top.m {
		m := &top.m[i]
		v := msg[m.start:m.end]
		switch {
		case strings.EqualFold(m.key, "id"):
			if string(v) != "null" {
				return member{}, false
			}
		case strings.EqualFold(m.key, "method"):
			s, ok := wireString(v)
			cancel = ok && string(s) == string(mcp.MethodNotificationCancelled)
		case strings.EqualFold(m.key, "params"):
			params = m
		}
	}
	if !cancel || params == nil {
		return member{}, false
	}
	p, ok := members(msg[params.start:params.end])
	if !ok {
		return member{}, false
	}
	var target *member
	for i := range p.m {
		if strings.EqualFold(p.m[i].key, "requestId") {
			target = &p.m[i]
		}
	}
	if target == nil {
		return member{}, false
	}
	at := *target
	at.keyStart += params.start
	at.start += params.start
	at.end += params.start
	if c := msg[at.start]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return member{}, false
	}
	return at, true
}
