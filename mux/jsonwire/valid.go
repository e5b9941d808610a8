package jsonwire

import "encoding/binary"

// MaxDepth is encoding/json's nesting limit: Valid refuses JSON that nests
// deeper, as json.Valid does, and so must any reader that is to accept
// exactly what json.Valid accepts.
const MaxDepth = 10000

// Valid reports whether b is one JSON value with optional surrounding
// whitespace, exactly as json.Valid does (FuzzJSONValid holds it to it):
// the bytes of strings are not checked for UTF-8, and nesting deeper than
// encoding/json's 10,000 levels is refused. It walks the bytes once, with
// no allocation, several times faster than encoding/json's scanner on long
// strings, which are most of a large result.
func Valid(b []byte) bool {
	i := SkipSpace(b, 0)
	i = validValue(b, i, 0)
	return i >= 0 && SkipSpace(b, i) == len(b)
}

// plainStringByte marks the bytes that a JSON string holds as they are:
// everything but the quote, the backslash and the control characters.
var plainStringByte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c != '"' && c != '\\'
	}
	return t
}()

// validValue returns the offset just past the valid value at b[i], or -1.
// depth is the number of arrays and objects around it.
func validValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return validString(b, i)
	case c == '{' || c == '[':
		if depth++; depth > MaxDepth {
			return -1
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if end == '}' {
				if i >= len(b) || b[i] != '"' {
					return -1
				}
				if i = validString(b, i); i < 0 {
					return -1
				}
				if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i = SkipSpace(b, i+1)
			}
			if i = validValue(b, i, depth); i < 0 {
				return -1
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return -1
			}
			switch b[i] {
			case ',':
				i = SkipSpace(b, i+1)
			case end:
				return i + 1
			default:
				return -1
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(b, i)
	case c == 't':
		return validLiteral(b, i, "true")
	case c == 'f':
		return validLiteral(b, i, "false")
	case c == 'n':
		return validLiteral(b, i, "null")
	}
	return -1
}

// IsHex reports whether c is a hexadecimal digit.
func IsHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func validLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// validString returns the offset just past the valid string that opens at
// b[i], or -1.
func validString(b []byte, i int) int {
	for i++; i < len(b); {
		if i = PlainRun(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !IsHex(b[i+2]) || !IsHex(b[i+3]) || !IsHex(b[i+4]) || !IsHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
	return -1
}

// Eight bytes at a time: repeated bytes, and the high bit of each.
const (
	everyByte = 0x0101010101010101
	highBits  = 0x8080808080808080
)

// PlainRun returns the offset of the first byte from b[i] on that a JSON
// string does not hold as it is (a quote, a backslash or a control
// character), or len(b). It tests eight bytes at a time (a byte below n
// is found by (x - n·everyByte) &^ x & highBits; an equal one as a zero
// of the XOR), and looks at single bytes only around the one it finds.
func PlainRun(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^(everyByte*'"'), x^(everyByte*'\\')
		if ((x-everyByte*0x20)&^x|(q-everyByte)&^q|(s-everyByte)&^s)&highBits != 0 {
			break
		}
	}
	for i < len(b) && plainStringByte[b[i]] {
		i++
	}
	return i
}

// validNumber returns the offset just past the valid number at b[i], or -1.
func validNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
