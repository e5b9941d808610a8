package naming

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// ResultKind says what a raw JSON value handed to RewriteURIs is, and so
// where the URIs naming a child's resources sit in it.
type ResultKind uint8

const (
	// tools/call result: content[] items of type "resource_link" (.uri)
	// and "resource" (.resource.uri).
	ResultToolCall ResultKind = iota
	// prompts/get result: messages[].content, one content item (an array
	// of items is taken too), of the same two types.
	ResultPromptGet
	// resources/read result: contents[].uri.
	ResultResourceRead
	// resources/list result: resources[].uri.
	ResultResourceList
	// resources/templates/list result: resourceTemplates[].uriTemplate;
	// the rewrite given is a template rewrite.
	ResultTemplateList
	// notifications/resources/updated params: .uri.
	ParamsResourceUpdated
)

// ErrBadJSON is wrapped by every error RewriteURIs returns: the input was
// not one well-formed JSON value.
var ErrBadJSON = errors.New("malformed JSON")

// RewriteURIs returns raw, a value of the given kind, with every URI that
// names a child resource replaced by rewrite(uri) when rewrite reports
// true. Everything else is kept byte for byte: key order, white space,
// number spelling, escapes in untouched strings, fields at every level that
// no spec defines. When nothing changes it returns raw itself. Where an
// object repeats a key, the last occurrence counts, as in encoding/json.
// RewriteURIs accepts exactly the inputs json.Valid accepts and reports an
// error wrapping ErrBadJSON for any other; it reads raw once.
func RewriteURIs(raw json.RawMessage, kind ResultKind, rewrite func(uri string) (string, bool)) (json.RawMessage, error) {
	r := uriRewriter{in: raw, rewrite: rewrite}
	err := r.document(kind)
	if err != nil {
		return nil, fmt.Errorf("rewriting resource URIs: %w", err)
	}
	if r.out == nil {
		return raw, nil
	}
	return append(r.out, raw[r.copied:]...), nil
}

// uriRewriter is one pass over a JSON value that validates it while
// walking down the paths its kind names, and splices new string values in
// where rewrite asks for them. Splices happen in input order.
type uriRewriter struct {
	in      []byte
	pos     int
	rewrite func(string) (string, bool)
	out     []byte // nil until the first splice
	copied  int    // in[:copied] is in out already
	stack   []byte // open containers while skipping: '{' or '['
	depth   int    // containers open on the walked path (at most 6)
}

// span is a value's bytes in the input, quotes included for a string;
// end is 0 when no value was seen.
type span struct{ start, end int }

func (r *uriRewriter) document(kind ResultKind) error {
	var err error
	r.ws()
	switch kind {
	case ResultToolCall:
		err = r.object(func(key []byte) error {
			if string(key) == "content" {
				return r.array(r.contentItem)
			}
			return r.skip()
		})
	case ResultPromptGet:
		err = r.object(func(key []byte) error {
			if string(key) != "messages" {
				return r.skip()
			}
			return r.array(func() error {
				return r.object(func(key []byte) error {
					if string(key) != "content" {
						return r.skip()
					}
					if r.peek() == '[' {
						return r.array(r.contentItem)
					}
					return r.contentItem()
				})
			})
		})
	case ResultResourceRead:
		err = r.listField("contents", "uri")
	case ResultResourceList:
		err = r.listField("resources", "uri")
	case ResultTemplateList:
		err = r.listField("resourceTemplates", "uriTemplate")
	case ParamsResourceUpdated:
		err = r.object(func(key []byte) error {
			if string(key) == "uri" {
				return r.uriValue()
			}
			return r.skip()
		})
	default:
		return fmt.Errorf("unknown result kind %d", kind)
	}
	if err != nil {
		return err
	}
	r.ws()
	if r.pos < len(r.in) {
		return r.syntaxError("after the top-level value")
	}
	return nil
}

// listField walks {list: [{field: uri}]}.
func (r *uriRewriter) listField(list, field string) error {
	return r.object(func(key []byte) error {
		if string(key) != list {
			return r.skip()
		}
		return r.array(func() error {
			return r.object(func(key []byte) error {
				if string(key) == field {
					return r.uriValue()
				}
				return r.skip()
			})
		})
	})
}

// contentItem rewrites one content item. Its type may come after its uri,
// so the candidates are recorded and the choice made at the item's end.
func (r *uriRewriter) contentItem() error {
	var typ, uri, inner span
	err := r.object(func(key []byte) error {
		switch string(key) {
		case "type":
			return r.stringSpan(&typ)
		case "uri":
			return r.stringSpan(&uri)
		case "resource":
			inner = span{}
			return r.object(func(key []byte) error {
				if string(key) == "uri" {
					return r.stringSpan(&inner)
				}
				return r.skip()
			})
		}
		return r.skip()
	})
	if err != nil || typ.end == 0 {
		return err
	}
	name := r.in[typ.start+1 : typ.end-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		name = []byte(r.text(typ))
	}
	switch string(name) {
	case "resource_link":
		r.splice(uri)
	case "resource":
		r.splice(inner)
	}
	return nil
}

// uriValue rewrites the value at the cursor if it is a string.
func (r *uriRewriter) uriValue() error {
	var s span
	if err := r.stringSpan(&s); err != nil {
		return err
	}
	r.splice(s)
	return nil
}

// stringSpan skips the value at the cursor, recording it in s if it is a
// string and clearing s otherwise (a later key replaces an earlier one).
func (r *uriRewriter) stringSpan(s *span) error {
	*s = span{}
	if r.peek() != '"' {
		return r.skip()
	}
	start := r.pos
	if err := r.str(); err != nil {
		return err
	}
	*s = span{start, r.pos}
	return nil
}

// splice replaces the string at s with rewrite's answer, if it has one
// that differs.
func (r *uriRewriter) splice(s span) {
	if s.end == 0 {
		return
	}
	old := r.text(s)
	repl, ok := r.rewrite(old)
	if !ok || repl == old {
		return
	}
	if r.out == nil {
		// Room for the rewrites to come: a list may have every
		// element's URI grow by a prefix.
		r.out = make([]byte, 0, len(r.in)+len(r.in)/8+len(repl)+256)
	}
	r.out = append(r.out, r.in[r.copied:s.start]...)
	r.out = appendJSONString(r.out, repl)
	r.copied = s.end
}

// text decodes the valid JSON string at s.
func (r *uriRewriter) text(s span) string {
	b := r.in[s.start:s.end]
	if body := b[1 : len(b)-1]; bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	var t string
	_ = json.Unmarshal(b, &t) // cannot fail: str validated b
	return t
}

// object walks the object at the cursor, calling member with each key
// (decoded only when it has escapes) and the cursor at its value; member
// must consume the value. Anything but an object is skipped.
func (r *uriRewriter) object(member func(key []byte) error) error {
	if r.peek() != '{' {
		return r.skip()
	}
	r.depth++
	r.pos++
	if r.ws(); r.peek() == '}' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		key, err := r.key()
		if err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		r.ws()
		switch r.peek() {
		case ',':
			r.pos++
			r.ws()
		case '}':
			r.pos++
			r.depth--
			return nil
		default:
			return r.syntaxError("after an object member")
		}
	}
}

// array walks the array at the cursor, calling elem with the cursor at
// each element; elem must consume it. Anything but an array is skipped.
func (r *uriRewriter) array(elem func() error) error {
	if r.peek() != '[' {
		return r.skip()
	}
	r.depth++
	r.pos++
	if r.ws(); r.peek() == ']' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		r.ws()
		if err := elem(); err != nil {
			return err
		}
		r.ws()
		switch r.peek() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			r.depth--
			return nil
		default:
			return r.syntaxError("after an array element")
		}
	}
}

// key reads an object key and its ':' and leaves the cursor at the value.
func (r *uriRewriter) key() ([]byte, error) {
	if r.peek() != '"' {
		return nil, r.syntaxError("where an object key belongs")
	}
	start := r.pos
	if err := r.str(); err != nil {
		return nil, err
	}
	key := r.in[start+1 : r.pos-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		key = []byte(r.text(span{start, r.pos}))
	}
	if r.ws(); r.peek() != ':' {
		return nil, r.syntaxError("after an object key")
	}
	r.pos++
	r.ws()
	return key, nil
}

// skip validates and steps over one value, iteratively, so that no input
// can exhaust the stack.
func (r *uriRewriter) skip() error {
	base := len(r.stack)
	for {
		// A value is expected here.
		r.ws()
		switch c := r.peek(); c {
		case '{', '[':
			if r.depth+len(r.stack)-base >= jsonwire.MaxDepth {
				return r.syntaxError("nested too deep")
			}
			r.pos++
			r.ws()
			if end := c + 2; r.peek() == end { // '}' is '{'+2, ']' is '['+2
				r.pos++
				break
			}
			r.stack = append(r.stack, c)
			if c == '{' {
				if err := r.rawKey(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if err := r.str(); err != nil {
				return err
			}
		case 't':
			if err := r.literal("true"); err != nil {
				return err
			}
		case 'f':
			if err := r.literal("false"); err != nil {
				return err
			}
		case 'n':
			if err := r.literal("null"); err != nil {
				return err
			}
		default:
			if err := r.number(); err != nil {
				return err
			}
		}
		// A value ended: close containers until one takes another value.
		for {
			if len(r.stack) == base {
				return nil
			}
			r.ws()
			open := r.stack[len(r.stack)-1]
			c := r.peek()
			if c == ',' {
				r.pos++
				if open == '{' {
					r.ws()
					if err := r.rawKey(); err != nil {
						return err
					}
				}
				break
			}
			if c != open+2 {
				return r.syntaxError("after a value")
			}
			r.pos++
			r.stack = r.stack[:len(r.stack)-1]
		}
	}
}

// rawKey is key for skipped objects: the key is not decoded.
func (r *uriRewriter) rawKey() error {
	if r.peek() != '"' {
		return r.syntaxError("where an object key belongs")
	}
	if err := r.str(); err != nil {
		return err
	}
	if r.ws(); r.peek() != ':' {
		return r.syntaxError("after an object key")
	}
	r.pos++
	return nil
}

// str steps over the string at the cursor, validating its escapes.
func (r *uriRewriter) str() error {
	in := r.in
	i := r.pos + 1
	for {
		// The bulk of a long text is skipped by IndexByte's vector loop;
		// only the bytes before the quote it finds need a second look.
		j := bytes.IndexByte(in[i:], '"')
		if j < 0 {
			return r.syntaxErrorAt(len(in), "in a string")
		}
		end := i + j
		escapedQuote := false
		for ; i < end; i++ {
			// Plain bytes are skipped eight at a time; the quote at end
			// stops the run at the latest.
			if i = jsonwire.PlainRun(in, i); i >= end {
				break
			}
			if c := in[i]; c < 0x20 {
				return r.syntaxErrorAt(i, "in a string (a control character)")
			}
			switch in[i+1] { // i < end, so in[i+1] exists
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				// A quote is not a hex digit, so a valid \uXXXX ends
				// before end.
				if !jsonwire.IsHex(in[i+2]) || !jsonwire.IsHex(in[i+3]) || !jsonwire.IsHex(in[i+4]) || !jsonwire.IsHex(in[i+5]) {
					return r.syntaxErrorAt(i, "in a string escape")
				}
				i += 5
			default:
				return r.syntaxErrorAt(i, "in a string escape")
			}
			if i == end { // the quote found was escaped: \"
				escapedQuote = true
				break
			}
		}
		if !escapedQuote {
			r.pos = end + 1
			return nil
		}
		i = end + 1
	}
}

func (r *uriRewriter) literal(word string) error {
	if len(r.in)-r.pos < len(word) || string(r.in[r.pos:r.pos+len(word)]) != word {
		return r.syntaxError("in a literal")
	}
	r.pos += len(word)
	return nil
}

// number steps over a JSON number: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?
func (r *uriRewriter) number() error {
	in, i := r.in, r.pos
	digits := func() bool {
		s := i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		return i > s
	}
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		digits()
	default:
		return r.syntaxErrorAt(i, "where a value belongs")
	}
	if i < len(in) && in[i] == '.' {
		i++
		if !digits() {
			return r.syntaxErrorAt(i, "in a number")
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if !digits() {
			return r.syntaxErrorAt(i, "in a number")
		}
	}
	r.pos = i
	return nil
}

// peek is the byte at the cursor, 0 at the end.
func (r *uriRewriter) peek() byte {
	if r.pos < len(r.in) {
		return r.in[r.pos]
	}
	return 0
}

func (r *uriRewriter) ws() {
	for r.pos < len(r.in) {
		switch r.in[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

func (r *uriRewriter) syntaxError(where string) error {
	return r.syntaxErrorAt(r.pos, where)
}

func (r *uriRewriter) syntaxErrorAt(at int, where string) error {
	if at >= len(r.in) {
		return fmt.Errorf("%w: unexpected end of input %s", ErrBadJSON, where)
	}
	return fmt.Errorf("%w: unexpected %q at offset %d %s", ErrBadJSON, r.in[at], at, where)
}

// appendJSONString appends s as a JSON string, escaping only what JSON
// requires (and U+2028, U+2029, as encoding/json does), not HTML
// characters, so that a URI keeps its spelling. Invalid UTF-8 becomes
// U+FFFD, as encoding/json makes it.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
