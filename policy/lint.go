package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Warning is a pattern that is valid but can never match an exposed tool
// name: almost certainly a mistake, though not one that grants anything.
type Warning struct {
	File string
	Line int
	Msg  string
}

// String returns "FILE:LINE: warning: message".
func (w Warning) String() string {
	return w.File + ":" + strconv.Itoa(w.Line) + ": warning: " + w.Msg
}

// Unmatchable returns a Warning for every pattern of p that can never match
// a tool name mcpmux exposes, given the separator and the configured
// server aliases, in file order:
//
//   - a pattern with a character no exposed name has: one outside
//     [A-Za-z0-9_-], other than the glob's own '*' and '?' (a glob has no
//     [...] classes, so "gh__delete_[a-z]*" is among these);
//   - a pattern whose literal start fits no alias + separator, such as
//     "gh__*" when there is no server gh.
//
// It warns only about what is certain: a pattern it says nothing about may
// still match nothing the servers offer.
func (p *Policy) Unmatchable(separator string, aliases []string) []Warning {
	if p == nil {
		return nil
	}
	var ws []Warning
	for _, r := range p.written {
		warn := func(format string, args ...any) {
			ws = append(ws, Warning{File: p.File, Line: r.line,
				Msg: fmt.Sprintf("%s pattern %q can never match: ", keyNames[r.key], r.pattern) + fmt.Sprintf(format, args...)})
		}
		if c, ok := foreignChar(r.pattern); ok {
			msg := "exposed tool names have only A-Z, a-z, 0-9, '_' and '-', not %q"
			if c == '[' {
				msg += " (a pattern has no [...] classes, only * and ?)"
			}
			warn(msg, c)
		}
		if len(aliases) > 0 && !fitsSomePrefix(r.pattern, separator, aliases) {
			n := literalLen(r.pattern)
			lit := r.pattern[:n]
			switch alias, _, ok := strings.Cut(lit, separator); {
			case ok && !slices.Contains(aliases, alias):
				warn("no server %s", alias)
			case n < len(r.pattern):
				warn("no exposed name starts with %q (each starts with a server's alias and %q)", lit, separator)
			default:
				warn("an exposed name is a server's alias, %q and a tool name", separator)
			}
		}
	}
	return ws
}

// Unmatchable returns the warnings of every policy in the set, by identity.
func (s *Set) Unmatchable(separator string, aliases []string) []Warning {
	var ws []Warning
	for _, id := range s.ids() {
		ws = append(ws, s.For(id).Unmatchable(separator, aliases)...)
	}
	return ws
}

// foreignChar returns the first character of pattern that no exposed name
// has and no glob operator is.
func foreignChar(pattern string) (rune, bool) {
	for i, c := range pattern {
		if c >= utf8.RuneSelf || !validNameByte(pattern[i]) && c != '*' && c != '?' {
			return c, true
		}
	}
	return 0, false
}

// validNameByte reports whether c may occur in an exposed name (see
// package mux: names.go).
func validNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// literalLen is the length of pattern's start before its first operator.
func literalLen(pattern string) int {
	if i := strings.IndexAny(pattern, "*?"); i >= 0 {
		return i
	}
	return len(pattern)
}

// fitsSomePrefix reports whether pattern could match a name that starts
// with some alias + separator and has at least one character after it.
func fitsSomePrefix(pattern, separator string, aliases []string) bool {
	n := literalLen(pattern)
	lit, wild := pattern[:n], n < len(pattern)
	for _, a := range aliases {
		prefix := a + separator
		if strings.HasPrefix(lit, prefix) && (wild || len(lit) > len(prefix)) ||
			wild && strings.HasPrefix(prefix, lit) {
			return true
		}
	}
	return false
}
