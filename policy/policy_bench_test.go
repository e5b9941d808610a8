package policy

import (
	"fmt"
	"testing"
)

// The policy check of every call: Allows on a parsed policy. Run with
// go test -run '^$' -bench Allows -benchmem ./policy; it allocates nothing per call
// (TestAllowsDoesNotAllocate holds it to that). BenchmarkAllows covers each
// kind of item; this, policies from a catch-all to a long one.

func BenchmarkAllowsPolicies(b *testing.B) {
	// A catch-all, a typical per-server policy, and a long one whose deny
	// and allow lists are scanned in full before the answer.
	many := "allow = ["
	for i := range 100 {
		many += fmt.Sprintf("%q, ", fmt.Sprintf("s%03d__tool_*", i))
	}
	many += "\"docs__*\"]\ndeny = [\"*__delete_*\", \"*__drop_*\"]\nallow_read_only = [\"tickets__*\"]\n"
	cases := []struct {
		name, body string
		item       Item
	}{
		{"star", "allow = [\"*\"]\n", tool("docs__search", false)},
		{"typical", "allow = [\"docs__*\"]\nallow_read_only = [\"tickets__*\"]\ndeny = [\"*__delete_*\"]\n", tool("tickets__list", true)},
		{"long", many, tool("docs__search", false)},
		{"long-refused", many, tool("other__search", false)},
	}
	for _, c := range cases {
		p, err := Parse(c.name+".toml", []byte(c.body))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Allows(c.item)
			}
		})
	}
}
