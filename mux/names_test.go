package mux

import (
	"strings"
	"testing"
)

func TestExposedNames(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5)
	cases := []struct {
		name  string
		alias string
		sep   string
		max   int
		tools []string
		want  []string
	}{
		{"plain", "docs", "__", 48, []string{"search", "get-doc"}, []string{"docs__search", "docs__get-doc"}},
		{"single separator", "docs", "_", 48, []string{"search"}, []string{"docs_search"}},
		{"characters outside the set", "docs", "__", 48, []string{"fs.read", "a b/c", "é"}, []string{"docs__fs_read", "docs__a_b_c", "docs___"}},
		{"collision after sanitizing", "docs", "__", 48, []string{"a.b", "a_b", "a-b"},
			[]string{"docs__a_b", "docs__a_b_" + shortHash("a_b", hashLen), "docs__a-b"}},
		{"too long", "docs", "__", 32, []string{long},
			[]string{"docs__" + long[:32-6-9] + "_" + shortHash(long, hashLen)}},
		{"two long names with one start", "docs", "__", 24, []string{long + "x", long + "y"},
			[]string{"docs__" + (long + "x")[:24-6-9] + "_" + shortHash(long+"x", hashLen),
				"docs__" + (long + "y")[:24-6-9] + "_" + shortHash(long+"y", hashLen)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for run := 0; run < 2; run++ { // the same input names the same way every run
				n := newNamer(c.alias, c.sep, c.max)
				for i, tool := range c.tools {
					got, _ := n.name(tool)
					if got != c.want[i] {
						t.Errorf("name(%q) = %q, want %q", tool, got, c.want[i])
					}
					if len(got) > c.max {
						t.Errorf("name(%q) = %q is longer than %d", tool, got, c.max)
					}
					for _, r := range got {
						if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
							t.Errorf("name %q has %q", got, r)
						}
					}
				}
			}
		})
	}
}

func TestCollisionReported(t *testing.T) {
	n := newNamer("docs", "__", 48)
	if _, collided := n.name("a.b"); collided {
		t.Error("first name reported as collision")
	}
	if _, collided := n.name("a_b"); !collided {
		t.Error("second name not reported as collision")
	}
}
