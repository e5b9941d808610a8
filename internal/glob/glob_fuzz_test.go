package glob

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference matches name against pattern by translating the pattern into a
// regular expression: an independent implementation of the same rules, for
// valid UTF-8 (Go's regexp reads any invalid byte as U+FFFD).
func reference(pattern, name string) bool {
	var re strings.Builder
	re.WriteString(`^(?s:`)
	for _, r := range pattern {
		switch r {
		case '*':
			re.WriteString(`.*`)
		case '?':
			re.WriteString(`.`)
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString(`)$`)
	return regexp.MustCompile(re.String()).MatchString(name)
}

// FuzzMatch checks that Compile and Match never panic, that Match agrees
// with the reference on valid UTF-8, and that a pattern with no wildcard
// matches exactly itself, byte for byte, whatever the bytes.
func FuzzMatch(f *testing.F) {
	f.Add("docs__*", "docs__search")
	f.Add("a*?c", "ac")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		// Exposed names are at most 128 bytes and patterns a line of a
		// policy; matching costs up to their product, which longer inputs
		// only make slow, not more interesting.
		if len(pattern) > 1024 || len(name) > 1024 {
			return
		}
		p, err := Compile(pattern)
		if pattern == "" {
			if err == nil {
				t.Fatal("the empty pattern compiled")
			}
			return
		}
		if err != nil {
			t.Fatalf("Compile(%q): %v", pattern, err)
		}
		got := p.Match(name)
		if set, err := CompileSet([]string{pattern, pattern}); err != nil || set.Match(name) != got {
			t.Fatalf("a set of %q disagrees with the pattern on %q (%v)", pattern, name, err)
		}
		if !strings.ContainsAny(pattern, "*?") {
			if want := pattern == name; got != want {
				t.Fatalf("%q.Match(%q) = %v, want %v", pattern, name, got, want)
			}
			if !p.Match(pattern) {
				t.Fatalf("%q does not match itself", pattern)
			}
		}
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			return
		}
		if want := reference(pattern, name); got != want {
			t.Fatalf("%q.Match(%q) = %v, the reference says %v", pattern, name, got, want)
		}
	})
}
