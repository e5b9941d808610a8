// Package naming makes the names and URIs mcpmux exposes: a child's tool
// and prompt names under its alias prefix, valid for every client, within
// the length budget and distinct whatever the child lists (ExposeNames);
// resource URIs and URI templates under mcpmux://<alias>/, and the way
// back (ExposeURI, ExposeTemplate, SplitURI, URITemplate); and the rewrite
// of the URIs in what a child sends (RewriteURIs).
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"github.com/mcpmux/mcpmux/config"
)

// hashLen is how many hex digits of a name's hash go into a shortened or
// de-duplicated name: enough that two tools of one child practically never
// meet again, short enough to leave most of the name readable. The config
// guarantees room for it, one character and a '_' after every prefix.
const hashLen = config.NameRoom - 2

// Sanitize replaces every character that OpenAI- and Anthropic-style
// clients refuse in a tool name with '_'.
func Sanitize(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for _, r := range name {
		if r < 0x80 && validNameByte(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// validNameByte reports whether c may appear in an exposed name.
func validNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])
	return h[:n]
}

// Exposed is the name one child tool is offered under.
type Exposed struct {
	Name     string
	Collided bool // a hash was appended because the rewritten name was ambiguous
}

// ExposeNames maps each of one child's tool names (origs) to its exposed
// name, prefix + name. Names from different aliases never meet, because the
// prefix (alias and separator, the alias free of '_') is never shortened; so
// collisions are settled per child.
//
// The mapping depends on the set of names only, never on their order, so a
// child cannot choose which tool a name (and so a policy pattern) means:
//
//  1. A clean name, one already valid that fits within maxLen, is always
//     exposed as itself.
//  2. A name mcpmux has to rewrite (sanitize, or shorten with a hash of the
//     whole name) keeps its rewritten form only if no clean name and no
//     other rewritten name has that form.
//  3. Every other rewritten name gets a hash of its original name appended
//     — all of the names sharing one form, not all but the first, since no
//     one of them has a better claim. These are placed in sorted order of
//     their original names, each taking the shortest hash that is still
//     free, so even a child that lists the hashed forms of its own names
//     gets distinct names.
//
// Every exposed name is valid ([A-Za-z0-9_-]) when prefix is, at most maxLen
// bytes long (given maxLen-len(prefix) >= config.NameRoom), and distinct
// origs get distinct names.
func ExposeNames(prefix string, maxLen int, origs []string) map[string]Exposed {
	out := make(map[string]Exposed, len(origs))
	taken := make(map[string]bool, len(origs))
	form := map[string]string{} // rewritten orig -> its rewritten form
	count := map[string]int{}   // rewritten form -> how many origs have it
	for _, orig := range origs {
		if _, done := out[orig]; done || form[orig] != "" {
			continue
		}
		if Sanitize(orig) == orig && len(prefix)+len(orig) <= maxLen {
			out[orig] = Exposed{Name: prefix + orig}
			taken[prefix+orig] = true
			continue
		}
		f := fit(prefix, maxLen, Sanitize(orig), "")
		form[orig] = f
		count[f]++
	}
	var ambiguous []string
	for orig, f := range form {
		if count[f] > 1 || taken[f] {
			ambiguous = append(ambiguous, orig)
			continue
		}
		out[orig] = Exposed{Name: f}
	}
	// Forms kept above are unique among themselves and not clean names, so
	// they can be marked taken only now.
	for _, n := range out {
		taken[n.Name] = true
	}
	slices.Sort(ambiguous)
	for _, orig := range ambiguous {
		name := hashed(prefix, maxLen, orig, taken)
		taken[name] = true
		out[orig] = Exposed{Name: name, Collided: true}
	}
	return out
}

// hashed returns a name for orig, its sanitized form with a hash appended,
// that is not taken: the shortest hash of orig that is free and fits, or,
// should every one be taken, a hash of orig and a counter.
func hashed(prefix string, maxLen int, orig string, taken map[string]bool) string {
	base := Sanitize(orig)
	longest := min(sha256.Size*2, maxLen-len(prefix)-1)
	for size := hashLen; size <= longest; size += 4 {
		if name := fit(prefix, maxLen, base, "_"+shortHash(orig, size)); !taken[name] {
			return name
		}
	}
	for i := 1; ; i++ {
		if name := fit(prefix, maxLen, base, "_"+shortHash(orig+"#"+strconv.Itoa(i), hashLen)); !taken[name] {
			return name
		}
	}
}

// fit joins prefix, base and suffix within maxLen characters. A name that is too
// long keeps its start and gets a hash of the whole base, so two long names
// that share a start still differ.
func fit(prefix string, maxLen int, base, suffix string) string {
	if len(prefix)+len(base)+len(suffix) <= maxLen {
		return prefix + base + suffix
	}
	if suffix == "" {
		suffix = "_" + shortHash(base, hashLen)
	}
	room := max(maxLen-len(prefix)-len(suffix), 0)
	return prefix + base[:min(room, len(base))] + suffix
}
