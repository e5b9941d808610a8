package jsonwire

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// JSON-RPC ids as bytes. A client's id is compared, and carried back, in
// the forms encoding/json gives it, without decoding a whole message.

// IDKey is an id in one form for all the ways mcp-go writes it back:
// decoded as an any, or as an mcp.RequestId, which turns a whole number
// into an int64 (so -0 comes back as 0).
func IDKey(id any) (string, bool) {
	if f, ok := id.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		id = int64(f)
	}
	b, err := json.Marshal(id)
	return string(b), err == nil
}

// AnswerIDKey is IDKey of the JSON id raw; nil and null are no id.
func AnswerIDKey(raw []byte) (string, bool) {
	if PlainInteger(raw) {
		return string(raw), true // what IDKey makes of it
	}
	var id any
	if len(raw) == 0 || json.Unmarshal(raw, &id) != nil || id == nil {
		return "", false
	}
	return IDKey(id)
}

// PlainInteger reports a JSON integer of at most 15 digits, without a sign
// or exponent, which a float64 holds exactly.
func PlainInteger(b []byte) bool {
	if len(b) == 0 || len(b) > 15 || len(b) > 1 && b[0] == '0' {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// NumbersFit reports whether every number in the valid JSON value b can be
// held by a float64, without decoding anything else.
func NumbersFit(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			start, exp := i, false
			for i+1 < len(b) && (b[i+1] >= '0' && b[i+1] <= '9' || b[i+1] == '.' || b[i+1] == '+' || b[i+1] == '-' ||
				b[i+1] == 'e' || b[i+1] == 'E') {
				i++
				exp = exp || b[i] == 'e' || b[i] == 'E'
			}
			// Without an exponent, only a number of more than 308 digits
			// can be too large.
			if exp || i+1-start > 308 {
				if _, err := strconv.ParseFloat(string(b[start:i+1]), 64); err != nil {
					return false
				}
			}
		}
	}
	return true
}

// PlainIDJSON reports a JSON string id that encoding/json writes back as
// it is: printable ASCII, nothing escaped, none of the characters it
// escapes for HTML.
func PlainIDJSON(v []byte) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	for _, b := range v[1 : len(v)-1] {
		if b < 0x20 || b > 0x7e || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			return false
		}
	}
	return true
}

// PlainIDString reports a string JSON writes as it is between quotes.
func PlainIDString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return true
}

// NumberKey is the value of lit, a valid JSON number, in one form: equal
// numbers however written (100, 1E2, 100.0, 1000e-1) have the same key.
// An integer of at most 64 digits is its digits; anything else is its
// significant digits and a decimal exponent ("15e-1"). An exponent beyond
// what an int holds keeps lit as it is.
func NumberKey(lit []byte) string {
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

// Loggable is id as the log shows it: itself, or its size when it is long.
func Loggable(id []byte) []byte {
	if len(id) <= 128 {
		return id
	}
	return strconv.AppendQuote(nil, "an id of "+strconv.Itoa(len(id))+" bytes")
}

// HeadFields reads the top-level fields of the first bytes of a JSON-RPC
// message, up to where they are cut off, matching names as encoding/json
// does: the id, when it is a string or a number, and whether a method comes
// among them (a method cut off counts).
func HeadFields(head []byte) (id json.RawMessage, method bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		key, _ := tok.(string)
		if err != nil {
			break
		}
		var v json.RawMessage
		err = dec.Decode(&v)
		switch {
		case strings.EqualFold(key, "method"):
			method = err != nil || string(v) != "null"
		case err != nil:
		case strings.EqualFold(key, "id"):
			id = nil
			if len(v) > 0 && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
				id = v
			}
		}
		if err != nil {
			break
		}
	}
	return id, method
}
