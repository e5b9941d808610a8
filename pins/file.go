package pins

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/internal/fileerr"
)

// Pin is one approved definition: the canonical fields the pin file holds
// and their digest.
type Pin struct {
	Def
	Digest string
}

// NewPin pins d.
func NewPin(d Def) Pin { return Pin{Def: d, Digest: d.Digest()} }

// Set is an immutable set of pins, at most one per kind and exposed name.
type Set struct {
	pins map[key]Pin
}

type key struct {
	kind Kind
	name string
}

// NewSet returns a set of ps; a later pin of the same kind and name
// replaces an earlier one.
func NewSet(ps ...Pin) *Set {
	s := &Set{pins: make(map[key]Pin, len(ps))}
	for _, p := range ps {
		s.pins[key{p.Kind, p.Name}] = p
	}
	return s
}

// Get returns the pin of the kind k exposed as name.
func (s *Set) Get(k Kind, name string) (Pin, bool) {
	if s == nil {
		return Pin{}, false
	}
	p, ok := s.pins[key{k, name}]
	return p, ok
}

// Len is the number of pins.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.pins)
}

// All returns every pin in file order: tools, then prompts, each by name.
func (s *Set) All() []Pin {
	if s == nil {
		return nil
	}
	out := make([]Pin, 0, len(s.pins))
	for _, p := range s.pins {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Pin) int {
		if c := cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// With returns s with ps added (replacing pins of the same kind and name)
// and the pins of drop removed.
func (s *Set) With(ps []Pin, drop ...Pin) *Set {
	next := NewSet(s.All()...)
	for _, p := range drop {
		delete(next.pins, key{p.Kind, p.Name})
	}
	for _, p := range ps {
		next.pins[key{p.Kind, p.Name}] = p
	}
	return next
}

// Ref is what serving needs of a pin: the server that offers it and its
// digest. Its fields stay in the file.
type Ref struct {
	Server string
	Sum    Sum
}

// Index is an immutable view of pins that holds only their Refs: what a
// Store serves.
type Index struct {
	refs map[key]Ref
}

// Get returns the pin of the kind k exposed as name.
func (x *Index) Get(k Kind, name string) (Ref, bool) {
	if x == nil {
		return Ref{}, false
	}
	r, ok := x.refs[key{k, name}]
	return r, ok
}

// Len is the number of pins.
func (x *Index) Len() int {
	if x == nil {
		return 0
	}
	return len(x.refs)
}

// Each calls f with every pin, in no order.
func (x *Index) Each(f func(k Kind, name string, r Ref)) {
	if x == nil {
		return
	}
	for k, r := range x.refs {
		f(k.kind, k.name, r)
	}
}

// Index returns the Refs of s. Its strings are copies, so that it keeps
// nothing of the file s was parsed from alive, and one server's alias is
// one string.
func (s *Set) Index() *Index {
	x := &Index{refs: make(map[key]Ref, len(s.pins))}
	x.add(s.pins)
	return x
}

// with returns x with the pins of ps added or replaced.
func (x *Index) with(ps []Pin) *Index {
	if len(ps) == 0 {
		return x
	}
	next := &Index{refs: make(map[key]Ref, len(x.refs)+len(ps))}
	for k, r := range x.refs {
		next.refs[k] = r
	}
	m := make(map[key]Pin, len(ps))
	for _, p := range ps {
		m[key{p.Kind, p.Name}] = p
	}
	next.add(m)
	return next
}

func (x *Index) add(ps map[key]Pin) {
	servers := map[string]string{}
	for k, p := range ps {
		srv := p.Server()
		if s, ok := servers[srv]; ok {
			srv = s
		} else {
			servers[srv] = srv
		}
		sum, _ := ParseSum(p.Digest) // a Pin's digest is well-formed: Parse and NewPin make them
		kind := Tool                 // a constant, not the file's bytes
		if k.kind == Prompt {
			kind = Prompt
		}
		x.refs[key{kind, strings.Clone(k.name)}] = Ref{Server: srv, Sum: sum}
	}
}

func kindOrder(k Kind) int {
	if k == Tool {
		return 0
	}
	return 1
}

const fileHeader = `# mcpmux pin file: the tool and prompt definitions approved for use.
# Review it like go.sum, and commit it. Each entry is "KIND NAME DIGEST",
# then its canonical fields, one per line, as canonical JSON.
# See what changed with "mcpmux pins diff"; approve with "mcpmux pins approve".
`

// write writes the pin file holding s to w: stable order, one entry per
// pin, one field per line, so that a change reads as a change of lines in
// a diff.
func (s *Set) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(fileHeader)
	for _, p := range s.All() {
		for _, part := range []string{"\n", string(p.Kind), " ", p.Name, " ", p.Digest, "\n"} {
			bw.WriteString(part)
		}
		for _, f := range p.Fields {
			for _, part := range []string{"  ", f.Key, " ", f.Value, "\n"} {
				bw.WriteString(part)
			}
		}
	}
	return bw.Flush()
}

// headerLine reads "KIND NAME DIGEST": tool or prompt, a name of
// [A-Za-z0-9_-], sha256: and 64 lower-case hex digits.
func headerLine(line string) (kind Kind, name, digest string, ok bool) {
	k, rest, _ := strings.Cut(line, " ")
	name, digest, _ = strings.Cut(rest, " ")
	if k != string(Tool) && k != string(Prompt) || name == "" || strings.Trim(name, nameChars) != "" {
		return "", "", "", false
	}
	if _, ok := ParseSum(digest); !ok || strings.ToLower(digest) != digest {
		return "", "", "", false
	}
	return Kind(k), name, digest, true
}

// fieldLine reads "  FIELD JSON": two spaces, a key of letters, a space
// and a value of at least one character.
func fieldLine(line string) (key, value string, ok bool) {
	rest, ok := strings.CutPrefix(line, "  ")
	key, value, _ = strings.Cut(rest, " ")
	if !ok || key == "" || value == "" || strings.Trim(key, letters) != "" {
		return "", "", false
	}
	return key, value, true
}

const (
	letters   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	nameChars = letters + "0123456789_-"
)

// Parse reads a pin file. It is strict: every problem is reported, as
// FILE:LINE (file is the name used in errors), and any problem fails the
// whole file, so that a half-edited file never stands for fewer pins.
func Parse(file string, data []byte) (*Set, error) {
	var errs fileerr.Errors
	fail := func(line int, format string, a ...any) {
		errs = append(errs, &fileerr.Error{File: file, Line: line, Msg: fmt.Sprintf(format, a...)})
	}
	set := &Set{pins: map[key]Pin{}}
	var cur *Pin
	var curLine int
	finish := func() {
		if cur == nil {
			return
		}
		switch {
		case cur.Field(fieldServer) == "" || cur.Field(fieldName) == "":
			fail(curLine, "%s %s: it needs both %q and %q", cur.Kind, cur.Name, fieldServer, fieldName)
		case cur.Def.Digest() != cur.Digest:
			fail(curLine, "%s %s: the digest does not match its fields (approve with mcpmux pins approve rather than edit by hand)", cur.Kind, cur.Name)
		default:
			set.pins[key{cur.Kind, cur.Name}] = *cur
		}
		cur = nil
	}
	seen := map[key]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if kind, name, digest, ok := headerLine(line); ok {
			finish()
			k := key{kind, name}
			if first, dup := seen[k]; dup {
				fail(n, "%s %s is pinned twice (first on line %d)", k.kind, k.name, first)
			}
			seen[k] = n
			cur, curLine = &Pin{Def: Def{Kind: k.kind, Name: k.name}, Digest: digest}, n
			continue
		}
		field, value, ok := fieldLine(line)
		switch {
		case !ok:
			fail(n, `expected "tool NAME sha256:HEX", "prompt NAME sha256:HEX" or an indented "FIELD JSON", not %q`, clip(line))
			continue
		case cur == nil:
			fail(n, "field %q before any tool or prompt", field)
			continue
		case !allowedField(cur.Kind, field):
			fail(n, "%s %s: %q is not a field of a %s pin", cur.Kind, cur.Name, field, cur.Kind)
			continue
		case cur.Field(field) != "":
			fail(n, "%s %s: field %q twice", cur.Kind, cur.Name, field)
			continue
		}
		canonical, err := isCanonical([]byte(value))
		if err != nil {
			fail(n, "%s %s: field %q: not JSON: %v", cur.Kind, cur.Name, field, err)
			continue
		}
		if !canonical {
			fail(n, "%s %s: field %q is not in canonical form", cur.Kind, cur.Name, field)
			continue
		}
		if last := len(cur.Fields); last > 0 && compareStrings(cur.Fields[last-1].Key, field) > 0 {
			fail(n, "%s %s: fields must be sorted by key", cur.Kind, cur.Name)
			continue
		}
		cur.Fields = append(cur.Fields, Field{field, value})
	}
	finish()
	if len(errs) > 0 {
		return nil, errs
	}
	return set, nil
}

func allowedField(k Kind, f string) bool {
	return f == fieldServer || f == fieldName || slices.Contains(kindFields[k], f)
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
