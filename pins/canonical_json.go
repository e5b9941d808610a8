package pins

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// canonicalJSON returns raw, one JSON value, in canonical form: no
// whitespace, object keys sorted by their UTF-16 code units (as RFC 8785
// does; of a key given twice, the last counts, as encoding/json reads it),
// strings re-escaped minimally, and numbers exactly as written (never
// through float64, so 12345678901234567890 stays as it is, and 1.0 and 1
// differ).
func canonicalJSON(raw []byte) ([]byte, error) {
	if !jsonwire.Valid(raw) {
		return nil, invalidJSON(raw)
	}
	c := getCanon()
	defer c.release()
	c.value(raw, skipSpace(raw, 0))
	return bytes.Clone(c.out), nil
}

// isCanonical reports whether raw is one JSON value in canonical form.
func isCanonical(raw []byte) (bool, error) {
	if !jsonwire.Valid(raw) {
		return false, invalidJSON(raw)
	}
	c := getCanon()
	defer c.release()
	c.value(raw, skipSpace(raw, 0))
	return bytes.Equal(c.out, raw), nil
}

// invalidJSON is why raw, which json.Valid refused, is not one JSON value.
func invalidJSON(raw []byte) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return errors.New("more than one JSON value")
}

// stringBytes is s as bytes, to be read only, never kept.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// value writes the canonical form of the JSON value at in[i] (valid JSON,
// no space before it) and returns where it ends.
func (c *canon) value(in []byte, i int) int {
	switch in[i] {
	case '{':
		return c.object(in, i)
	case '[':
		c.out = append(c.out, '[')
		i = skipSpace(in, i+1)
		for n := 0; in[i] != ']'; n++ {
			if n > 0 {
				c.out = append(c.out, ',')
			}
			i = skipSpace(in, c.value(in, i))
			if in[i] == ',' {
				i = skipSpace(in, i+1)
			}
		}
		c.out = append(c.out, ']')
		return i + 1
	case '"':
		return c.str(in, i)
	}
	j := i + 1 // a number, true, false or null: as written
	for j < len(in) && !isDelim(in[j]) {
		j++
	}
	c.out = append(c.out, in[i:j]...)
	return j
}

// object writes the object at in[i] with its members sorted by key and,
// of a key given twice, the last member only.
func (c *canon) object(in []byte, i int) int {
	start, base, kbase := len(c.out), len(c.mems), len(c.keys)
	i = skipSpace(in, i+1)
	for in[i] != '}' {
		k0 := len(c.keys)
		m0 := len(c.out)
		i = c.decodeKey(in, i)
		c.out = appendEscaped(c.out, c.keys[k0:])
		c.out = append(c.out, ':')
		i = skipSpace(in, i+1)
		i = c.value(in, i)
		c.mems = append(c.mems, member{k0, len(c.keys), m0, len(c.out)})
		if i = skipSpace(in, i); in[i] == ',' {
			i = skipSpace(in, i+1)
		}
	}
	mems := c.mems[base:]
	slices.SortStableFunc(mems, func(a, b member) int {
		return compareBytes(c.keys[a.k0:a.k1], c.keys[b.k0:b.k1])
	})
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	c.out = append(c.out[:start], '{')
	first := true
	for n, m := range mems {
		if n+1 < len(mems) && bytes.Equal(c.keys[m.k0:m.k1], c.keys[mems[n+1].k0:mems[n+1].k1]) {
			continue // a later member has the same key
		}
		if !first {
			c.out = append(c.out, ',')
		}
		first = false
		c.out = append(c.out, c.tmp[m.m0-start:m.m1-start]...)
	}
	c.out = append(c.out, '}')
	c.keys, c.mems = c.keys[:kbase], c.mems[:base]
	return i + 1
}

// decodeKey appends the decoded string at in[i] to keys and returns where
// its colon is.
func (c *canon) decodeKey(in []byte, i int) int {
	var end int
	c.keys, end = decodeString(c.keys, in, i)
	return skipSpace(in, end)
}

// str writes the string at in[i] re-escaped minimally.
func (c *canon) str(in []byte, i int) int {
	k0 := len(c.keys)
	var end int
	c.keys, end = decodeString(c.keys, in, i)
	c.out = appendEscaped(c.out, c.keys[k0:])
	c.keys = c.keys[:k0]
	return end
}

// decodeString appends the string at in[i] (valid JSON), decoded as
// encoding/json decodes it, to dst and returns dst and where it ends.
func decodeString(dst, in []byte, i int) ([]byte, int) {
	i++ // the quote
	for {
		c := in[i]
		switch {
		case c == '"':
			return dst, i + 1
		case c == '\\':
			switch e := in[i+1]; e {
			case 'u':
				r := hex4(in[i+2 : i+6])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if d := utf16.DecodeRune(r, hex4(in[i+2:i+6])); d != utf8.RuneError {
							dst = utf8.AppendRune(dst, d)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			default: // " \ /
				dst = append(dst, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			dst = utf8.AppendRune(dst, r) // an invalid byte becomes U+FFFD
			i += size
		}
	}
}

// hex4 is the value of four hex digits (valid JSON has them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			r = r<<4 | rune(c-'a'+10)
		}
	}
	return r
}

// skipValue returns where the JSON value at in[i] (valid) ends.
func skipValue(in []byte, i int) int {
	switch in[i] {
	case '"':
		for i++; in[i] != '"'; i++ {
			if in[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch in[i] {
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			case '"':
				i = skipValue(in, i) - 1
			}
		}
	}
	for i++; i < len(in) && !isDelim(in[i]); i++ {
	}
	return i
}

func isDelim(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func skipSpace(in []byte, i int) int {
	for i < len(in) && (in[i] == ' ' || in[i] == '\t' || in[i] == '\n' || in[i] == '\r') {
		i++
	}
	return i
}

// compareStrings orders by UTF-16 code units, as JavaScript sorts and RFC
// 8785 specifies, so that a key's place does not depend on the language
// that reads the file.
func compareStrings(a, b string) int {
	return compareBytes(stringBytes(a), stringBytes(b))
}

// compareBytes is compareStrings of byte slices.
func compareBytes(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if c := compareRunes(ra, rb); c != 0 {
			return c
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func compareRunes(a, b rune) int {
	if a == b {
		return 0
	}
	if ua, ub := utf16Key(a), utf16Key(b); ua != ub {
		return int(ua) - int(ub)
	}
	return int(a) - int(b)
}

// utf16Key is the first UTF-16 code unit of r.
func utf16Key(r rune) uint16 {
	if r >= 0x10000 {
		return uint16(0xD800 + ((r - 0x10000) >> 10))
	}
	return uint16(r)
}

// appendEscaped appends s as a JSON string, escaping only what JSON
// requires (and U+FFFD, which an invalid byte decodes to, as \ufffd).
func appendEscaped(b []byte, s []byte) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			j := i + 1
			for j < len(s) && s[j] >= 0x20 && s[j] < utf8.RuneSelf && s[j] != '"' && s[j] != '\\' {
				j++
			}
			b = append(b, s[i:j]...)
			i = j
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r < 0x20:
			b = append(b, `\u00`...)
			b = append(b, hexDigit[r>>4], hexDigit[r&0xf])
		case r == utf8.RuneError:
			b = append(b, `\ufffd`...)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

const hexDigit = "0123456789abcdef"

func unquote(v string) string {
	var s string
	_ = json.Unmarshal([]byte(v), &s)
	return s
}
