package config

import (
	"errors"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// An index records where each key of a TOML document first appears, so that
// problems found after decoding can name their line, and tables decoded into
// maps can be put back in file order.
//
// It is built from go-toml's unstable.Parser, whose AST carries the byte
// range of every key and scalar value.
type index struct {
	lineStarts []int // offset of the first byte of each line
	// keys maps pathKey(path) to the offset where the key at path first
	// appears. Element i of an array is the path part elemPart(i): for an
	// array of tables, at its [[header]]; for an inline array, at the
	// element itself (elements without a position, arrays, are left out).
	keys map[string]int
	// arrays counts the elements of each array of tables seen so far, by
	// pathKey(path), so that later headers can address its last element.
	arrays map[string]int
}

// elemPart is the path part standing for element i of an array. It cannot
// clash with a key: no TOML value is both an array and a table.
func elemPart(i int) string {
	return "[" + strconv.Itoa(i) + "]"
}

// indexDocument indexes data, which must be a complete TOML document.
func indexDocument(data []byte) (*index, *Error) {
	ix := &index{
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
				line = ix.lineOf(off)
			}
		}
		return nil, &Error{Line: line, Msg: "invalid TOML: " + err.Error()}
	}
	return ix, nil
}

// addHeader records the key of a [table] or [[array]] header and returns the
// path of the table it opens. A part naming an array of tables stands for
// its last element, as in TOML; the last part of an [[array]] header adds
// an element, recorded at the header.
func (ix *index) addHeader(key unstable.Iterator, array bool) []string {
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
			path = append(path, elemPart(count))
			ix.add(pathKey(path), off)
		case isArray && count > 0:
			path = append(path, elemPart(count-1))
		}
	}
	return path
}

// addKey records every prefix of prefix+key and returns the full path.
func (ix *index) addKey(prefix []string, key unstable.Iterator) []string {
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
func (ix *index) addKeyValue(table []string, kv *unstable.Node) {
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
			elem := append(slices.Clip(path), elemPart(i))
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

func (ix *index) add(pk string, off int) {
	if _, ok := ix.keys[pk]; !ok {
		ix.keys[pk] = off
	}
}

// offset returns where the key at path first appears, falling back to its
// nearest indexed ancestor, then to the start of the document.
func (ix *index) offset(path []string) int {
	for n := len(path); n > 0; n-- {
		if off, ok := ix.keys[pathKey(path[:n])]; ok {
			return off
		}
	}
	return 0
}

// line returns the line where the key at path first appears.
func (ix *index) line(path []string) int {
	return ix.lineOf(ix.offset(path))
}

// elemLine returns the line of element i of the array at path, or the line
// of its key when the element's position is unknown.
func (ix *index) elemLine(path []string, i int) int {
	return ix.line(append(slices.Clip(path), elemPart(i)))
}

// lineOf returns the 1-based line holding byte offset off.
func (ix *index) lineOf(off int) int {
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

// quoteKey writes a key part as it would appear in TOML: bare when it can
// be, quoted otherwise.
func quoteKey(k string) string {
	if k != "" && strings.IndexFunc(k, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) < 0 {
		return k
	}
	return strconv.Quote(k)
}

// dotted writes a key path as TOML would: parts joined by '.'.
func dotted(path []string) string {
	parts := make([]string, len(path))
	for i, p := range path {
		parts[i] = quoteKey(p)
	}
	return strings.Join(parts, ".")
}
