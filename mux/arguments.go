package mux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// maxArgumentDepth bounds how deeply a call's arguments may nest objects and
// arrays. It bounds the decoder's recursion and, with the schema's own
// bound (see schemaWork), the work of validating them.
const maxArgumentDepth = 128

// decodeArguments decodes a call's arguments, a JSON object, in one pass
// that also refuses what json.Unmarshal would let through: a key that
// appears twice in one object, at any depth (a child whose parser keeps the
// first value would act on a value that was never validated), and nesting
// deeper than maxArgumentDepth. Values decode as json.Unmarshal decodes
// them into an any. levels counts the values at each depth (levels[0] is
// the object itself), for the validation budget.
func decodeArguments(raw []byte) (args map[string]any, levels []int, err error) {
	d := argDecoder{dec: json.NewDecoder(bytes.NewReader(raw))}
	tok, err := d.dec.Token()
	if err != nil {
		return nil, nil, d.syntax(err)
	}
	if tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("%w: arguments must be a JSON object", errInvalidArguments)
	}
	v, err := d.value(tok, 0)
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("%w: arguments: more than one JSON value", errInvalidArguments)
	}
	return v.(map[string]any), d.levels, nil
}

type argDecoder struct {
	dec    *json.Decoder
	levels []int
}

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

func (e *pathError) Unwrap() error { return errInvalidArguments }

// pointerEscaper escapes a key as a JSON pointer segment.
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func (d *argDecoder) syntax(err error) error {
	return fmt.Errorf("%w: arguments are not valid JSON: %v", errInvalidArguments, err)
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
		return nil, fmt.Errorf("%w: arguments: objects and arrays nested more than %d deep", errInvalidArguments, maxArgumentDepth)
	}
	switch delim {
	case '{':
		obj := map[string]any{}
		for d.dec.More() {
			kt, err := d.dec.Token()
			if err != nil {
				return nil, d.syntax(err)
			}
			key := kt.(string)
			if _, dup := obj[key]; dup {
				return nil, &pathError{what: "duplicate key " + strconv.Quote(key)}
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

// within adds a path segment to a pathError as it unwinds.
func within(err error, segment string) error {
	var pe *pathError
	if errors.As(err, &pe) {
		pe.path = append(pe.path, segment)
	}
	return err
}
