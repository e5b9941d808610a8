package pins

import (
	"bytes"
	"fmt"
	"slices"
	"sync"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// canon is the scratch space of canonical forms, pooled, so that a digest
// allocates nothing once the pool is warm.
type canon struct {
	out    []byte
	keys   []byte   // the decoded keys of the objects being written, the definition's first
	mems   []member // their members, innermost object's last
	tmp    []byte
	fields []fieldSpan
	spans  []span
	top    []topMember
}

// member is one member of an object being written: its decoded key in
// keys, and its canonical `"key":value` in out.
type member struct{ k0, k1, m0, m1 int }

// fieldSpan is one field of the definition written: its key in keys, its
// value in out.
type fieldSpan struct{ k0, k1, v0, v1 int }

type span struct{ v0, v1 int }

// topMember is one member of the definition: its key in keys, and its
// value in the definition, or, for v0 < 0, the string lit.
type topMember struct {
	k0, k1, v0, v1 int
	lit            string
}

var canonPool = sync.Pool{New: func() any { return new(canon) }}

func getCanon() *canon { return canonPool.Get().(*canon) }

// maxPooled bounds the scratch space kept for the next use, so that one
// huge definition does not stay in memory.
const maxPooled = 64 << 10

func (c *canon) release() {
	if cap(c.out) > maxPooled || cap(c.keys) > maxPooled || cap(c.tmp) > maxPooled {
		return
	}
	c.out, c.keys, c.mems, c.tmp, c.fields, c.spans = c.out[:0], c.keys[:0], c.mems[:0], c.tmp[:0], c.fields[:0], c.spans[:0]
	clear(c.top) // no alias or name kept alive
	c.top = c.top[:0]
	canonPool.Put(c)
}

// definition writes to out the canonical fields of def as one JSON object,
// whole or partial, and records where each field's key and value are.
func (c *canon) definition(kind Kind, name, alias, childName string, def []byte, whole bool) error {
	keys, ok := partialOrder[kind]
	if !ok {
		return fmt.Errorf("pins: unknown kind %q", kind)
	}
	if !jsonwire.Valid(def) {
		return fmt.Errorf("%s %s: definition: %w", kind, name, invalidJSON(def))
	}
	if whole {
		return c.wholeDefinition(kind, name, alias, childName, def)
	}
	// Where each key's value is in def (the last, when given twice).
	c.spans = slices.Grow(c.spans[:0], len(keys))[:len(keys)]
	for i := range c.spans {
		c.spans[i] = span{-1, -1}
	}
	i := skipSpace(def, 0)
	switch def[i] {
	case 'n':
		// null: a definition without fields.
	case '{':
		i = skipSpace(def, i+1)
		for def[i] != '}' {
			k0 := len(c.keys)
			i = skipSpace(def, c.decodeKey(def, i)+1) // past the ':'
			v0 := i
			i = skipValue(def, i)
			for at, k := range keys {
				if string(c.keys[k0:]) == k {
					c.spans[at] = span{v0, i}
				}
			}
			c.keys = c.keys[:k0]
			if i = skipSpace(def, i); def[i] == ',' {
				i = skipSpace(def, i+1)
			}
		}
	default:
		return fmt.Errorf("%s %s: definition: not a JSON object", kind, name)
	}
	c.out = append(c.out, '{')
	for at, k := range keys {
		k0 := len(c.keys)
		c.keys = append(c.keys, k...)
		k1 := len(c.keys)
		var v0 int
		switch k {
		case fieldServer, fieldName:
			s := alias
			if k == fieldName {
				s = childName
			}
			v0 = c.keyed(k0, k1)
			c.out = appendEscaped(c.out, stringBytes(s))
		default:
			sp := c.spans[at]
			if sp.v0 < 0 || def[sp.v0] == 'n' {
				c.keys = c.keys[:k0]
				continue // absent or null
			}
			v0 = c.keyed(k0, k1)
			c.value(def, sp.v0)
		}
		c.fields = append(c.fields, fieldSpan{k0, k1, v0, len(c.out)})
	}
	c.out = append(c.out, '}')
	return nil
}

// wholeDefinition is definition of every member of def (valid JSON).
func (c *canon) wholeDefinition(kind Kind, name, alias, childName string, def []byte) error {
	c.top = c.top[:0]
	i := skipSpace(def, 0)
	switch def[i] {
	case 'n':
		// null: a definition without members.
	case '{':
		i = skipSpace(def, i+1)
		for def[i] != '}' {
			k0 := len(c.keys)
			i = skipSpace(def, c.decodeKey(def, i)+1) // past the ':'
			v0 := i
			i = skipValue(def, i)
			switch key := c.keys[k0:]; {
			case string(key) == fieldName:
				c.keys = c.keys[:k0] // the child's own name is written below
			case isServerKey(key):
				c.keys = slices.Insert(c.keys, k0, '~')
				fallthrough
			default:
				c.top = append(c.top, topMember{k0: k0, k1: len(c.keys), v0: v0, v1: i})
			}
			if i = skipSpace(def, i); def[i] == ',' {
				i = skipSpace(def, i+1)
			}
		}
	default:
		return fmt.Errorf("%s %s: definition: not a JSON object", kind, name)
	}
	for _, m := range [...]struct{ key, lit string }{{fieldName, childName}, {fieldServer, alias}} {
		k0 := len(c.keys)
		c.keys = append(c.keys, m.key...)
		c.top = append(c.top, topMember{k0: k0, k1: len(c.keys), v0: -1, lit: m.lit})
	}
	slices.SortStableFunc(c.top, func(a, b topMember) int {
		return compareBytes(c.keys[a.k0:a.k1], c.keys[b.k0:b.k1])
	})
	c.out = append(c.out, '{')
	for n, m := range c.top {
		if n+1 < len(c.top) && bytes.Equal(c.keys[m.k0:m.k1], c.keys[c.top[n+1].k0:c.top[n+1].k1]) {
			continue // a later member has the same key
		}
		if m.v0 >= 0 && def[m.v0] == 'n' {
			continue // null: absent
		}
		v0 := c.keyed(m.k0, m.k1)
		if m.v0 < 0 {
			c.out = appendEscaped(c.out, stringBytes(m.lit))
		} else {
			c.value(def, m.v0)
		}
		c.fields = append(c.fields, fieldSpan{m.k0, m.k1, v0, len(c.out)})
	}
	c.out = append(c.out, '}')
	return nil
}

// isServerKey reports whether key is "server" after any number of '~'.
func isServerKey(key []byte) bool {
	return string(bytes.TrimLeft(key, "~")) == fieldServer
}

// keyed appends the member separator if one is due, and the key in keys
// [k0:k1] with its colon; it returns where the value is to start.
func (c *canon) keyed(k0, k1 int) int {
	if len(c.fields) > 0 {
		c.out = append(c.out, ',')
	}
	c.out = appendEscaped(c.out, c.keys[k0:k1])
	c.out = append(c.out, ':')
	return len(c.out)
}
