package glob

import "testing"

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"docs__*", "docs__search", true},
		{"docs__*", "tickets__search", false},
		{"*", "", true},
		{"*", "a/b.c", true},
		{"*__delete_*", "tickets__delete_ticket", true},
		{"*__delete_*", "tickets__remove", false},
		{"crash_for_test", "crash_for_test", true},
		{"crash_for_test", "crash_for_test2", false},
		{"crash_*_test", "crash_for_test", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"*.write", "fs.write", true},
		{"é*", "éa", true},
		{"?", "é", true},
		{"a*?c", "abc", true},
		{"a*?c", "ac", false},
	}
	for _, c := range cases {
		p, err := Compile(c.pattern)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q.Match(%q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestCompileEmpty(t *testing.T) {
	if _, err := Compile(""); err == nil {
		t.Fatal("empty pattern compiled")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	p, err := Compile("github__*_review_?omment")
	if err != nil {
		t.Fatal(err)
	}
	name := "github__create_pull_request_review_comment"
	if n := testing.AllocsPerRun(100, func() { p.Match(name) }); n != 0 {
		t.Fatalf("Match allocates %v times", n)
	}
	if !p.Match(name) {
		t.Fatal("no match")
	}
}
