package pins

import (
	"cmp"
	"slices"
	"strings"
)

// Pin is one approved definition: the canonical fields the pin file holds
// and their digest.
type Pin struct {
	Def
	Digest string
	// Partial marks a pin of the first canonical form (CanonicalPartial),
	// from a pin file of format 1: it covers only its kind's partial
	// fields, and is compared with PartialDigest until it is pinned whole.
	Partial bool
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

// Ref is what serving needs of a pin: the server that offers it, its
// digest, and whether it is partial (Pin.Partial). Its fields stay in the
// file.
type Ref struct {
	Server  string
	Sum     Sum
	Partial bool
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
		x.refs[key{kind, strings.Clone(k.name)}] = Ref{Server: srv, Sum: sum, Partial: p.Partial}
	}
}

func kindOrder(k Kind) int {
	if k == Tool {
		return 0
	}
	return 1
}
