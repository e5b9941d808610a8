// Package args checks a tool call's arguments. It decodes them (Decode,
// Object), refusing what a child could read otherwise than mcpmux does;
// vets a tool's inputSchema when the tool is listed (NewChecker, Memo):
// its size, its depth, its patterns and the work validating against it
// could take; and validates each call against it (Checker.Check) within
// that work, no call waiting for another.
package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxArgumentDepth bounds how deeply a call's arguments may nest objects and
// arrays. It bounds the decoder's recursion and, with the schema's own
// bound (see schemaWork), the work of validating them.
const maxArgumentDepth = 128

// Decode decodes a call's arguments, a JSON object, in one pass
// that also refuses what json.Unmarshal would let through: a key that
// appears twice in one object, at any depth (a child whose parser keeps the
// first value would act on a value that was never validated), two keys of
// one object that are equal under Unicode simple case folding (the
// strings.EqualFold relation: a child that matches names without regard to
// case, as Go's encoding/json does decoding into a struct, would act on
// whichever it takes, past a schema or a rule that read the other), and
// nesting deeper than maxArgumentDepth. Values decode as json.Unmarshal
// decodes them into an any. levels counts the values at each depth
// (levels[0] is the object itself), for the validation budget.
func Decode(raw []byte) (args map[string]any, levels []int, err error) {
	if args, levels, ok := decodeFlat(raw); ok {
		return args, levels, nil
	}
	return decodeGeneral(raw)
}

// decodeGeneral is Decode of any arguments, by encoding/json's tokens.
func decodeGeneral(raw []byte) (args map[string]any, levels []int, err error) {
	d := argDecoder{dec: json.NewDecoder(bytes.NewReader(raw))}
	tok, err := d.dec.Token()
	if err != nil {
		return nil, nil, d.syntax(err)
	}
	if tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("%w: arguments must be a JSON object", ErrInvalid)
	}
	v, err := d.value(tok, 0)
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("%w: arguments: more than one JSON value", ErrInvalid)
	}
	return v.(map[string]any), d.levels, nil
}

// Object returns a call's arguments decoded, for validation, with
// the count of their values at each depth, and as the JSON to forward.
// Arguments given as JSON are forwarded byte for byte, so that no number
// loses precision on the way.
func Object(args any) (map[string]any, json.RawMessage, []int, error) {
	var raw json.RawMessage
	switch a := args.(type) {
	case nil:
		return map[string]any{}, json.RawMessage(`{}`), []int{1}, nil
	case json.RawMessage:
		if t := bytes.TrimSpace(a); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			return map[string]any{}, json.RawMessage(`{}`), []int{1}, nil
		}
		raw = a
	case map[string]any:
		if a == nil {
			return map[string]any{}, json.RawMessage(`{}`), []int{1}, nil
		}
		var err error
		if raw, err = json.Marshal(a); err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	default:
		return nil, nil, nil, fmt.Errorf("%w: arguments must be a JSON object, not %T", ErrInvalid, args)
	}
	m, levels, err := Decode(raw)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, raw, levels, nil
}

type argDecoder struct {
	dec    *json.Decoder
	levels []int
}

// linearKeys is how many keys an object may have before a new key is
// looked up among them by hash rather than compared with each.
const linearKeys = 32

// pathError is a refusal found at a path, which is filled in, innermost
// segment first, as the decoder unwinds.
type pathError struct {
	what string // "duplicate key %q" and the like
	path []string
}

func (e *pathError) Error() string {
	p := "(root)"
	if len(e.path) > 0 {
		s := slices.Clone(e.path)
		slices.Reverse(s)
		p = "/" + strings.Join(s, "/")
	}
	return fmt.Sprintf("arguments: %s at %s", e.what, p)
}

func (e *pathError) Unwrap() error { return ErrInvalid }

// pointerEscaper escapes a key as a JSON pointer segment.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func (d *argDecoder) syntax(err error) error {
	return fmt.Errorf("%w: arguments are not valid JSON: %v", ErrInvalid, err)
}

// value decodes the value that begins with tok, at depth.
func (d *argDecoder) value(tok json.Token, depth int) (any, error) {
	if depth == len(d.levels) {
		d.levels = append(d.levels, 0)
	}
	d.levels[depth]++
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxArgumentDepth {
		return nil, fmt.Errorf("%w: arguments: objects and arrays nested more than %d deep", ErrInvalid, maxArgumentDepth)
	}
	switch delim {
	case '{':
		obj := map[string]any{}
		var byHash map[uint64][]string // obj's keys by foldHash, once it has linearKeys
		for d.dec.More() {
			kt, err := d.dec.Token()
			if err != nil {
				return nil, d.syntax(err)
			}
			key := kt.(string)
			if _, dup := obj[key]; dup {
				return nil, &pathError{what: "duplicate key " + strconv.Quote(key)}
			}
			if len(obj) == linearKeys {
				byHash = make(map[uint64][]string, 2*linearKeys)
				for k := range obj {
					h := foldHash(k)
					byHash[h] = append(byHash[h], k)
				}
			}
			var h uint64
			if byHash != nil {
				h = foldHash(key)
			}
			if other, ok := caseTwin(obj, byHash, h, key); ok {
				return nil, &pathError{what: fmt.Sprintf("keys %s and %s differ only in case", strconv.Quote(other), strconv.Quote(key))}
			}
			vt, err := d.dec.Token()
			if err != nil {
				return nil, d.syntax(err)
			}
			v, err := d.value(vt, depth+1)
			if err != nil {
				return nil, within(err, pointerEscaper.Replace(key))
			}
			obj[key] = v
			if byHash != nil {
				byHash[h] = append(byHash[h], key)
			}
		}
		_, err := d.dec.Token() // '}'
		if err != nil {
			return nil, d.syntax(err)
		}
		return obj, nil
	default: // '['
		arr := []any{}
		for i := 0; d.dec.More(); i++ {
			vt, err := d.dec.Token()
			if err != nil {
				return nil, d.syntax(err)
			}
			v, err := d.value(vt, depth+1)
			if err != nil {
				return nil, within(err, strconv.Itoa(i))
			}
			arr = append(arr, v)
		}
		if _, err := d.dec.Token(); err != nil { // ']'
			return nil, d.syntax(err)
		}
		return arr, nil
	}
}

// caseTwin returns the key of obj that key is equal to under simple case
// folding, if there is one; byHash, when not nil, holds obj's keys by
// foldHash, and h is key's. obj's keys are pairwise unequal under folding (each was checked
// as it came), so there is at most one.
func caseTwin(obj map[string]any, byHash map[uint64][]string, h uint64, key string) (string, bool) {
	if byHash != nil {
		for _, k := range byHash[h] {
			if strings.EqualFold(k, key) {
				return k, true
			}
		}
		return "", false
	}
	for k := range obj {
		if strings.EqualFold(k, key) {
			return k, true
		}
	}
	return "", false
}

// foldHash is a hash of s under Unicode simple case folding: two strings
// strings.EqualFold holds equal have the same hash. Each rune counts as the
// least rune of its folding orbit (unicode.SimpleFold), so that k, K and
// the Kelvin sign count alike. It allocates nothing.
func foldHash(s string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211 // FNV-1a
	h := uint64(offset)
	for i := 0; i < len(s); {
		r := rune(s[i])
		if r < utf8.RuneSelf {
			i++
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A' // the least of a, A (and of k, K, U+212A; s, S, U+017F)
			}
		} else {
			var size int
			r, size = utf8.DecodeRuneInString(s[i:])
			i += size
			least := r
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				least = min(least, f)
			}
			r = least
		}
		h = (h ^ uint64(r)) * prime
	}
	return h
}

// within adds a path segment to a pathError as it unwinds.
func within(err error, segment string) error {
	var pe *pathError
	if errors.As(err, &pe) {
		pe.path = append(pe.path, segment)
	}
	return err
}
