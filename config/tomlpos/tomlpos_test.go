package tomlpos

import (
	"errors"
	"testing"
)

const doc = `# a config
[mux]
separator = "__"

[servers.docs]
command = "docs"
args = [
  "-v",
  "--port", # a comment between elements
  "8080",
]
env = { TOKEN = "x", "odd key" = "y" }

[[upstream.tokens]]
identity = "a"

[[upstream.tokens]]
identity = "b"
`

// Each key is found at the line it first appears on; an array's elements
// at their own lines, an array of tables' elements at their headers; a key
// not in the document falls back to its nearest ancestor.
func TestLines(t *testing.T) {
	ix, err := Read([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path []string
		line int
	}{
		{[]string{"mux"}, 2},
		{[]string{"mux", "separator"}, 3},
		{[]string{"servers", "docs"}, 5},
		{[]string{"servers", "docs", "command"}, 6},
		{[]string{"servers", "docs", "args"}, 7},
		{[]string{"servers", "docs", "env", "odd key"}, 12},
		{[]string{"servers", "docs", "missing"}, 5},
		{[]string{"upstream", "tokens", ElemPart(1), "identity"}, 18},
		{[]string{"nowhere"}, 1},
	}
	for _, c := range cases {
		if got := ix.Line(c.path); got != c.line {
			t.Errorf("Line(%q) = %d, want %d", c.path, got, c.line)
		}
	}
	for i, want := range []int{8, 9, 10} {
		if got := ix.ElemLine([]string{"servers", "docs", "args"}, i); got != want {
			t.Errorf("ElemLine(args, %d) = %d, want %d", i, got, want)
		}
	}
	if got := ix.ElemLine([]string{"upstream", "tokens"}, 0); got != 14 {
		t.Errorf("ElemLine(tokens, 0) = %d, want 14", got)
	}
}

func TestDotted(t *testing.T) {
	if got, want := Dotted([]string{"servers", "docs", "odd key", ""}), `servers.docs."odd key".""`; got != want {
		t.Errorf("Dotted = %s, want %s", got, want)
	}
}

// A document that is not TOML is refused with the line it breaks on.
func TestSyntaxError(t *testing.T) {
	_, err := Read([]byte("[mux]\nseparator = \"__\"\nbroken = = 1\n"))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 3 {
		t.Fatalf("Read = %v, want a syntax error at line 3", err)
	}
}
