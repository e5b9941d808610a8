// Package glob matches names against the shell-style patterns used in
// mcpmux's config and policy files.
//
// Unlike path.Match, '*' also matches '/', '.' and every other character:
// tool names are flat, and a child may put any character in them.
package glob

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// ErrBadPattern reports a pattern that can never match anything.
var ErrBadPattern = errors.New("bad pattern")

// Pattern is a checked glob: '*' matches any run of characters (including
// none), '?' exactly one character; every other character matches itself.
type Pattern struct {
	src string
}

// Compile checks a pattern and prepares it for matching.
func Compile(pattern string) (Pattern, error) {
	if pattern == "" {
		return Pattern{}, fmt.Errorf("%w: empty pattern", ErrBadPattern)
	}
	return Pattern{src: pattern}, nil
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.src }

// Match reports whether name matches the whole pattern. It allocates
// nothing: policies run it on every call.
func (p Pattern) Match(name string) bool {
	pat := p.src
	if pat == "" {
		return false
	}
	// Backtracking over the last '*' only is enough: a later star can always
	// absorb what an earlier one would have taken.
	px, nx := 0, 0
	starPx, starNx := -1, 0
	for px < len(pat) || nx < len(name) {
		if px < len(pat) {
			switch c := pat[px]; c {
			case '*':
				starPx, starNx = px, nx
				px++
				continue
			case '?':
				if nx < len(name) {
					_, w := utf8.DecodeRuneInString(name[nx:])
					px, nx = px+1, nx+w
					continue
				}
			default:
				if nx < len(name) && name[nx] == c {
					px, nx = px+1, nx+1
					continue
				}
			}
		}
		if starPx >= 0 && starNx < len(name) {
			// Let the star take one more character and try again.
			_, w := utf8.DecodeRuneInString(name[starNx:])
			starNx += w
			px, nx = starPx+1, starNx
			continue
		}
		return false
	}
	return true
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
