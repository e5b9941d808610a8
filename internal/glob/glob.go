// Package glob matches names against the shell-style patterns used in
// mcpmux's config and policy files.
//
// Unlike path.Match, '*' also matches '/', '.' and every other character:
// tool names are flat, and a child may put any character in them.
package glob

import (
	"errors"
	"strings"
)

// ErrBadPattern reports a pattern that can never match anything.
var ErrBadPattern = errors.New("bad pattern")

// Pattern is a compiled glob: '*' matches any run of characters (including
// none), '?' exactly one character; every other character matches itself.
type Pattern struct {
	src   string
	parts []string // literal runs between '*'s; '?' is kept and matched per rune
}

// Compile checks a pattern and prepares it for matching.
func Compile(pattern string) (Pattern, error) {
	if pattern == "" {
		return Pattern{}, errors.Join(ErrBadPattern, errors.New("empty pattern"))
	}
	return Pattern{src: pattern, parts: strings.Split(pattern, "*")}, nil
}

// MustCompile is Compile for patterns known at build time.
func MustCompile(pattern string) Pattern {
	p, err := Compile(pattern)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether name matches the whole pattern.
func (p Pattern) Match(name string) bool {
	if len(p.parts) == 0 {
		return false
	}
	if len(p.parts) == 1 {
		return matchFixed(p.parts[0], name)
	}
	first, last := p.parts[0], p.parts[len(p.parts)-1]
	if !hasPrefix(name, first) {
		return false
	}
	name = name[prefixLen(name, first):]
	for _, mid := range p.parts[1 : len(p.parts)-1] {
		i := index(name, mid)
		if i < 0 {
			return false
		}
		name = name[i+prefixLen(name[i:], mid):]
	}
	return hasSuffix(name, last)
}

// Set is a list of patterns; it matches a name that any of them matches.
type Set []Pattern

// CompileSet compiles every pattern, reporting the first bad one.
func CompileSet(patterns []string) (Set, error) {
	set := make(Set, 0, len(patterns))
	for _, s := range patterns {
		p, err := Compile(s)
		if err != nil {
			return nil, err
		}
		set = append(set, p)
	}
	return set, nil
}

// Match reports whether any pattern in the set matches name.
func (s Set) Match(name string) bool {
	for _, p := range s {
		if p.Match(name) {
			return true
		}
	}
	return false
}

// The helpers below treat '?' in the literal as "any one rune".

func matchFixed(lit, s string) bool {
	ls, ss := []rune(lit), []rune(s)
	if len(ls) != len(ss) {
		return false
	}
	for i := range ls {
		if ls[i] != '?' && ls[i] != ss[i] {
			return false
		}
	}
	return true
}

// prefixLen returns how many bytes of s the literal consumes, assuming it
// matches at the start of s.
func prefixLen(s, lit string) int {
	n := 0
	for range []rune(lit) {
		_, size := firstRune(s[n:])
		n += size
	}
	return n
}

func hasPrefix(s, lit string) bool {
	rs := []rune(s)
	ls := []rune(lit)
	if len(rs) < len(ls) {
		return false
	}
	return matchFixed(lit, string(rs[:len(ls)]))
}

func hasSuffix(s, lit string) bool {
	rs := []rune(s)
	ls := []rune(lit)
	if len(rs) < len(ls) {
		return false
	}
	return matchFixed(lit, string(rs[len(rs)-len(ls):]))
}

// index returns the byte offset of the first place lit matches in s, or -1.
func index(s, lit string) int {
	if !strings.Contains(lit, "?") {
		return strings.Index(s, lit)
	}
	for i := range s {
		if hasPrefix(s[i:], lit) {
			return i
		}
	}
	if lit == "" {
		return len(s)
	}
	return -1
}

func firstRune(s string) (rune, int) {
	for _, r := range s {
		return r, len(string(r))
	}
	return 0, 0
}
