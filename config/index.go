package config

import (
	"errors"
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
	lineStarts []int          // offset of the first byte of each line
	keys       map[string]int // pathKey(path) -> offset where the key first appears
	// elems maps pathKey(path) of an array value to the offset of each of
	// its elements, or -1 for an element without a position (an array).
	elems map[string][]int
}

// indexDocument indexes data, which must be a complete TOML document.
func indexDocument(data []byte) (*index, *Error) {
	ix := &index{
		keys:  make(map[string]int),
		elems: make(map[string][]int),
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
		case unstable.Table, unstable.ArrayTable:
			table = ix.addKey(nil, e.Key())
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
		pk := pathKey(path)
		if _, ok := ix.elems[pk]; ok {
			return
		}
		offs := []int{}
		it := v.Children()
		for it.Next() {
			n := it.Node()
			if n.Kind == unstable.Comment {
				continue
			}
			off := -1
			if n.Raw.Length > 0 {
				off = int(n.Raw.Offset)
			}
			offs = append(offs, off)
		}
		ix.elems[pk] = offs
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
	if offs := ix.elems[pathKey(path)]; i < len(offs) && offs[i] >= 0 {
		return ix.lineOf(offs[i])
	}
	return ix.line(path)
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
