package naming

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// checkNames fails t unless got, the mapping ExposeNames returned for
// origs, gives every orig a valid, distinct name with the prefix, within
// maxLen.
func checkNames(t *testing.T, prefix string, maxLen int, origs []string, got map[string]Exposed) {
	t.Helper()
	owner := map[string]string{}
	for _, orig := range origs {
		n, ok := got[orig]
		if !ok {
			t.Fatalf("%q has no name", orig)
		}
		if len(n.Name) > maxLen {
			t.Errorf("%q -> %q: longer than %d", orig, n.Name, maxLen)
		}
		if !strings.HasPrefix(n.Name, prefix) {
			t.Errorf("%q -> %q: does not start with %q", orig, n.Name, prefix)
		}
		for i := range len(n.Name) {
			if !validNameByte(n.Name[i]) {
				t.Errorf("%q -> %q: has %q", orig, n.Name, n.Name[i])
			}
		}
		if prev, dup := owner[n.Name]; dup && prev != orig {
			t.Errorf("%q and %q both -> %q", prev, orig, n.Name)
		}
		owner[n.Name] = orig
	}
	if len(got) != len(owner) {
		t.Errorf("%d names for %d distinct tools", len(got), len(owner))
	}
}

// permutations calls f with every order of s (s has a few elements).
func permutations(s []string, f func([]string)) {
	var rec func(k int)
	rec = func(k int) {
		if k == len(s) {
			f(slices.Clone(s))
			return
		}
		for i := k; i < len(s); i++ {
			s[k], s[i] = s[i], s[k]
			rec(k + 1)
			s[k], s[i] = s[i], s[k]
		}
	}
	rec(0)
}

func TestExposedNames(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5)
	// shortened is how a name too long for maxLen is cut under "docs__",
	// with a hash of size digits.
	shortened := func(maxLen int, name string, size int) string {
		return "docs__" + Sanitize(name)[:maxLen-6-1-size] + "_" + shortHash(name, size)
	}
	// Another tool whose name is what long+"x" is shortened to: valid and
	// within 24, so it keeps it, and long+"x" needs a longer hash.
	squatter := strings.TrimPrefix(shortened(24, long+"x", hashLen), "docs__")
	cases := []struct {
		name     string
		sep      string
		maxLen   int
		tools    []string
		want     map[string]string
		collided []string
	}{
		{"plain", "__", 48, []string{"search", "get-doc"},
			map[string]string{"search": "docs__search", "get-doc": "docs__get-doc"}, nil},
		{"single separator", "_", 48, []string{"search"},
			map[string]string{"search": "docs_search"}, nil},
		{"characters outside the set", "__", 48, []string{"fs.read", "a b/c", "é"},
			map[string]string{"fs.read": "docs__fs_read", "a b/c": "docs__a_b_c", "é": "docs___"}, nil},
		{"a valid name beats a rewritten one", "__", 48, []string{"write.file", "write_file"},
			map[string]string{
				"write_file": "docs__write_file",
				"write.file": "docs__write_file_" + shortHash("write.file", hashLen),
			}, []string{"write.file"}},
		{"two rewritten names that meet both take a hash", "__", 48, []string{"a.b", "a b", "a-b"},
			map[string]string{
				"a.b": "docs__a_b_" + shortHash("a.b", hashLen),
				"a b": "docs__a_b_" + shortHash("a b", hashLen),
				"a-b": "docs__a-b",
			}, []string{"a.b", "a b"}},
		{"a valid name and two rewritten ones", "__", 48, []string{"a.b", "a_b", "a/b"},
			map[string]string{
				"a_b": "docs__a_b",
				"a.b": "docs__a_b_" + shortHash("a.b", hashLen),
				"a/b": "docs__a_b_" + shortHash("a/b", hashLen),
			}, []string{"a.b", "a/b"}},
		{"a tool named like another's hashed name", "__", 48,
			[]string{"a.b", "a_b", "a_b_" + shortHash("a.b", hashLen)},
			map[string]string{
				"a_b":                              "docs__a_b",
				"a_b_" + shortHash("a.b", hashLen): "docs__a_b_" + shortHash("a.b", hashLen),
				"a.b":                              "docs__a_b_" + shortHash("a.b", hashLen+4),
			}, []string{"a.b"}},
		{"too long", "__", 32, []string{long},
			map[string]string{long: shortened(32, long, hashLen)}, nil},
		{"two long names with one start", "__", 24, []string{long + "x", long + "y"},
			map[string]string{long + "x": shortened(24, long+"x", hashLen), long + "y": shortened(24, long+"y", hashLen)}, nil},
		{"a valid name equal to a long name's short form", "__", 24, []string{long + "x", squatter},
			map[string]string{squatter: "docs__" + squatter, long + "x": shortened(24, long+"x", hashLen+4)},
			[]string{long + "x"}},
		{"no room to lengthen the hash", "__", 18, []string{"a.b", "a_b", "a_b_" + shortHash("a.b", hashLen)},
			map[string]string{
				"a_b":                              "docs__a_b",
				"a_b_" + shortHash("a.b", hashLen): "docs__a_b_" + shortHash("a.b", hashLen),
				"a.b":                              "docs__a_b_" + shortHash("a.b#1", hashLen),
			}, []string{"a.b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := "docs" + c.sep
			permutations(slices.Clone(c.tools), func(order []string) {
				got := ExposeNames(prefix, c.maxLen, order)
				checkNames(t, prefix, c.maxLen, order, got)
				for orig, want := range c.want {
					if got[orig].Name != want {
						t.Errorf("order %q: %q -> %q, want %q", order, orig, got[orig].Name, want)
					}
					if collided := slices.Contains(c.collided, orig); got[orig].Collided != collided {
						t.Errorf("order %q: %q collided = %t, want %t", order, orig, got[orig].Collided, collided)
					}
				}
			})
		})
	}
}

// Many tools whose names all rewrite to one form still get distinct,
// order-independent names.
func TestExposedNamesCrowd(t *testing.T) {
	var tools []string
	for _, r := range ".,/ :;!@#$%^&()+=" {
		tools = append(tools, "x"+string(r)+"y")
	}
	tools = append(tools, "x_y")
	want := ExposeNames("s__", 20, tools)
	checkNames(t, "s__", 20, tools, want)
	for i := range 20 {
		order := slices.Clone(tools)
		// A rotation and a reversal: different orders, deterministically.
		order = append(order[i%len(order):], order[:i%len(order)]...)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		got := ExposeNames("s__", 20, order)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("order %q: %v, want %v", order, got, want)
		}
	}
	if want["x_y"].Name != "s__x_y" {
		t.Errorf("x_y -> %q", want["x_y"].Name)
	}
}
