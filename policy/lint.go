package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcpmux/mcpmux/internal/glob"
)

// A Warning is a pattern that is valid but can never match: almost
// certainly a mistake, though not one that grants anything.
type Warning struct {
	File string
	Line int
	Msg  string
}

// String returns "FILE:LINE: warning: message".
func (w Warning) String() string {
	return w.File + ":" + strconv.Itoa(w.Line) + ": warning: " + w.Msg
}

// Servers is what Unmatchable needs to know about the configured servers.
type Servers struct {
	Separator string   // between an alias and a child's name in exposed names
	Aliases   []string // every configured server's alias
	// Unprefixed reports that some server exposes its tools and prompts
	// under the child's own names (prefix = false), so an exposed name
	// need not start with an alias.
	Unprefixed bool
}

// Unmatchable returns a Warning for every pattern of p that can never match,
// given the configured servers, in file order.
//
// A pattern of allow, allow_read_only or deny, and one of a [[rule]]'s
// tools, is matched against the tool and prompt names mcpmux exposes; it
// warns about
//
//   - a pattern with a character no exposed name has: one outside
//     [A-Za-z0-9_-], other than the glob's own '*' and '?' (a glob has no
//     [...] classes, so "gh__delete_[a-z]*" is among these);
//   - a pattern whose literal start fits no alias + separator, such as
//     "gh__*" when there is no server gh (unless some server is
//     unprefixed).
//
// A rule whose tools pattern never matches is switched off, which removes
// a restriction, so these warnings matter most there.
//
// A pattern of allow_resources is matched against server aliases; it warns
// about one that matches no configured alias (so also about one with a
// character no alias has).
//
// It warns only about what is certain: a pattern it says nothing about may
// still match nothing the servers offer. Without aliases, it checks
// characters alone.
func (p *Policy) Unmatchable(servers Servers) []Warning {
	if p == nil {
		return nil
	}
	var ws []Warning
	check := func(pat pattern, what string) {
		warn := func(format string, args ...any) {
			ws = append(ws, Warning{File: p.File, Line: pat.line,
				Msg: fmt.Sprintf("%s %q can never match: ", what, pat.glob) + fmt.Sprintf(format, args...)})
		}
		if pat.key == keyAllowResources {
			unmatchableServer(pat.glob, servers.Aliases, warn)
		} else {
			unmatchableName(pat.glob, servers, warn)
		}
	}
	for _, pat := range p.written {
		check(pat, keyNames[pat.key]+" pattern")
	}
	for _, r := range p.rules {
		for _, pat := range r.written {
			check(pat, "rule "+strconv.Itoa(r.Index)+": tools pattern")
		}
	}
	return ws
}

// unmatchableName warns, through warn, if a pattern over exposed tool and
// prompt names can match none of them.
func unmatchableName(pattern string, servers Servers, warn func(format string, args ...any)) {
	if c, ok := foreignChar(pattern, validNameByte); ok {
		msg := "exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not %q"
		if c == '[' {
			msg += " (a pattern has no [...] classes, only * and ?)"
		}
		warn(msg, c)
	}
	if len(servers.Aliases) == 0 || servers.Unprefixed || fitsSomePrefix(pattern, servers.Separator, servers.Aliases) {
		return
	}
	n := literalLen(pattern)
	lit := pattern[:n]
	switch alias, _, ok := strings.Cut(lit, servers.Separator); {
	case ok && !slices.Contains(servers.Aliases, alias):
		warn("no server %s", alias)
	case n < len(pattern):
		warn("no exposed name starts with %q (each starts with a server's alias and %q)", lit, servers.Separator)
	default:
		warn("an exposed name is a server's alias, %q and a tool or prompt name", servers.Separator)
	}
}

// unmatchableServer warns, through warn, if an allow_resources pattern can
// match no alias of aliases.
func unmatchableServer(pattern string, aliases []string, warn func(format string, args ...any)) {
	if c, ok := foreignChar(pattern, validAliasByte); ok {
		msg := "server aliases have only a-z, 0-9 and '-', not %q"
		switch {
		case c == '[':
			msg += " (a pattern has no [...] classes, only * and ?)"
		case c >= 'A' && c <= 'Z':
			msg += " (aliases are lower case)"
		default:
			msg += " (allow_resources names servers, not resources)"
		}
		warn(msg, c)
		return
	}
	if len(aliases) == 0 {
		return
	}
	pat, err := glob.Compile(pattern)
	if err != nil || slices.ContainsFunc(aliases, pat.Match) {
		return
	}
	if literalLen(pattern) == len(pattern) {
		warn("no server %s", pattern)
		return
	}
	warn("it matches no server's alias")
}

// Unmatchable returns the warnings of every policy in the set, by identity.
func (s *Set) Unmatchable(servers Servers) []Warning {
	var ws []Warning
	for _, id := range s.ids() {
		ws = append(ws, s.For(id).Unmatchable(servers)...)
	}
	return ws
}

// foreignChar returns the first character of pattern that valid does not
// accept and no glob operator is.
func foreignChar(pattern string, valid func(byte) bool) (rune, bool) {
	for i, c := range pattern {
		if c >= utf8.RuneSelf || !valid(pattern[i]) && c != '*' && c != '?' {
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

// validAliasByte reports whether c may occur in a server alias (see package
// config).
func validAliasByte(c byte) bool {
	return c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
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
