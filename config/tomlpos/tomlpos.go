// Package tomlpos finds where each key of a TOML document sits, so that a
// problem found after decoding can name its line.
package tomlpos

import (
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// An Index records where each key of a TOML document first appears, so
// that problems found after decoding can name their line, and tables
// decoded into maps can be put back in file order.
//
// It is built from go-toml's unstable.Parser, whose AST carries the byte
// range of every key and scalar value.
type Index struct {
	lineStarts []int // offset of the first byte of each line
	// keys maps pathKey(path) to the offset where the key at path first
	// appears. Element i of an array is the path part ElemPart(i): for an
	// array of tables, at its [[header]]; for an inline array, at the
	// element itself (elements without a position, arrays, are left out).
	keys map[string]int
	// arrays counts the elements of each array of tables seen so far, by
	// pathKey(path), so that later headers can address its last element.
	arrays map[string]int
}

// ElemPart is the path part standing for element i of an array. It cannot
// clash with a key: no TOML value is both an array and a table.
func ElemPart(i int) string {
	return "[" + strconv.Itoa(i) + "]"
}

// Read indexes data, which must be a complete TOML document; an error
// names the line where data stops being TOML.
func Read(data []byte) (*Index, error) {
	ix := &Index{
		keys:   make(map[string]int),
		arrays: make(map[string]int),
	}
	ix.lineStarts = append(ix.lineStarts, 0)
	for i, c := range data {
		if c == '\n' {
			ix.lineStarts = append(ix.lineStarts, i+1)
		}
	}

	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			table = ix.addHeader(e.Key(), false)
		case unstable.ArrayTable:
			table = ix.addHeader(e.Key(), true)
		case unstable.KeyValue:
			ix.addKeyValue(table, e)
		}
	}
	if err := p.Error(); err != nil {
		// go-toml accepted the document before we got here, so this
		// should not happen; report it rather than trust a partial index.
		line := 1
		var perr *unstable.ParserError
		if errors.As(err, &perr) {
			if off := cap(data) - cap(perr.Highlight); off >= 0 && off <= len(data) {
				line = ix.LineOf(off)
			}
		}
		return nil, &SyntaxError{Line: line, Err: err}
	}
	return ix, nil
}

// addHeader records the key of a [table] or [[array]] header and returns the
// path of the table it opens. A part naming an array of tables stands for
// its last element, as in TOML; the last part of an [[array]] header adds
// an element, recorded at the header.
func (ix *Index) addHeader(key unstable.Iterator, array bool) []string {
	var path []string
	for key.Next() {
		n := key.Node()
		off := int(n.Raw.Offset)
		path = append(path, string(n.Data))
		pk := pathKey(path)
		ix.add(pk, off)
		count, isArray := ix.arrays[pk]
		switch {
		case array && key.IsLast():
			ix.arrays[pk] = count + 1
			path = append(path, ElemPart(count))
			ix.add(pathKey(path), off)
		case isArray && count > 0:
			path = append(path, ElemPart(count-1))
		}
	}
	return path
}

// addKey records every prefix of prefix+key and returns the full path.
func (ix *Index) addKey(prefix []string, key unstable.Iterator) []string {
	path := append([]string(nil), prefix...)
	for key.Next() {
		n := key.Node()
		path = append(path, string(n.Data))
		ix.add(pathKey(path), int(n.Raw.Offset))
	}
	return path
}

// addKeyValue indexes a key-value in table, descending into inline tables and
// recording the position of array elements.
func (ix *Index) addKeyValue(table []string, kv *unstable.Node) {
	path := ix.addKey(table, kv.Key())
	v := kv.Value()
	switch v.Kind {
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if n := it.Node(); n.Kind == unstable.KeyValue {
				ix.addKeyValue(path, n)
			}
		}
	case unstable.Array:
		i := 0
		it := v.Children()
		for it.Next() {
			n := it.Node()
			if n.Kind == unstable.Comment {
				continue
			}
			elem := append(slices.Clip(path), ElemPart(i))
			i++
			if n.Raw.Length > 0 {
				ix.add(pathKey(elem), int(n.Raw.Offset))
			}
			if n.Kind == unstable.InlineTable {
				kvs := n.Children()
				for kvs.Next() {
					if kv := kvs.Node(); kv.Kind == unstable.KeyValue {
						ix.addKeyValue(elem, kv)
					}
				}
			}
		}
	}
}

func (ix *Index) add(pk string, off int) {
	if _, ok := ix.keys[pk]; !ok {
		ix.keys[pk] = off
	}
}

// Offset returns where the key at path first appears, falling back to its
// nearest indexed ancestor, then to the start of the document.
func (ix *Index) Offset(path []string) int {
	for n := len(path); n > 0; n-- {
		if off, ok := ix.keys[pathKey(path[:n])]; ok {
			return off
		}
	}
	return 0
}

// Line returns the line where the key at path first appears.
func (ix *Index) Line(path []string) int {
	return ix.LineOf(ix.Offset(path))
}

// ElemLine returns the line of element i of the array at path, or the line
// of its key when the element's position is unknown.
func (ix *Index) ElemLine(path []string, i int) int {
	return ix.Line(append(slices.Clip(path), ElemPart(i)))
}

// LineOf returns the 1-based line holding byte offset off.
func (ix *Index) LineOf(off int) int {
	return sort.Search(len(ix.lineStarts), func(i int) bool { return ix.lineStarts[i] > off })
}

// pathKey encodes a key path unambiguously as a map key: each part is
// prefixed by its length, so no choice of key names can collide.
func pathKey(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// QuoteKey writes a key part as it would appear in TOML: bare when it can
// be, quoted otherwise.
func QuoteKey(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0 {
		return k
	}
	return strconv.Quote(k)
}

// Dotted writes a key path as TOML would: parts joined by '.'.
func Dotted(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = QuoteKey(p)
	}
	return strings.Join(parts, ".")
}

// SyntaxError is the line at which a document Read refused stops being TOML.
type SyntaxError struct {
	Line int
	Err  error
}

func (e *SyntaxError) Error() string { return "invalid TOML: " + e.Err.Error() }

func (e *SyntaxError) Unwrap() error { return e.Err }
