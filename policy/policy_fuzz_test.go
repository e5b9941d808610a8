package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse checks that Parse never panics; that a refused file gets
// errors naming the file, each one line, at a line within the file (or at
// none, for a syntax error go-toml cannot place); and that an accepted file
// means what it says: a deny wins for tools and prompts, a prompt is
// granted as a tool that writes, resources go by allow_resources alone;
// written back out, it parses to the same rules, and the same file with a
// byte order mark or a trailing comment does too. Its rules are located
// within the file and evaluate to a verdict, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`allow = ["docs__*"]` + "\n" + `deny = ["*__delete_*"]` + "\n"))
	f.Add([]byte("allow = [\n  \"a\",\n  1,\n]\ndeny = \"x\"\n[t]\n"))
	f.Add([]byte("allow_resources = [\"docs\", \"tick*\"]\ndeny = [\"docs\", \"*\"]\n"))
	f.Add([]byte("allow_resources = [\n  'a',\n  '',\n  2,\n]\nallow_resources = []\n"))
	f.Add([]byte(publicReader))
	f.Add([]byte("[[rule]]\ntools = [\"*\"]\ndeny_if = '''\nargs.x.all(a, a > 1) ||\n claims.team == \"ops\"'''\nmessage = \"no\"\n"))
	f.Add([]byte("[[rule]]\ntools = [\"a\", 1]\nallow_if = 'args.'\n[[rule]]\nallow = []\n[rule]\n"))
	const file = "policies/reader.toml"
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(file, data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %T %v is not a non-empty Errors", err, err)
			}
			lines := bytes.Count(data, []byte("\n")) + 1
			for _, e := range errs {
				if e.File != file || e.Line < 0 || e.Line > lines || strings.Contains(e.Msg, "\n") {
					t.Fatalf("bad error %q (the file has %d lines)", e.Error(), lines)
				}
			}
			return
		}
		if p.Identity != "reader" || p.File != file {
			t.Fatalf("policy of %q from %q", p.Identity, p.File)
		}
		_ = p.String()
		lines := bytes.Count(data, []byte("\n")) + 1
		in := &Input{Tool: "docs__search", Server: "docs", Args: map[string]any{"path": "/x", "n": 1.0, "l": []any{"a"}},
			Claims: map[string]any{"team": "ops"}}
		for i, r := range p.Rules() {
			if r.Index != i+1 || r.File != file || r.Line < 1 || r.Line > lines || r.Message == "" {
				t.Fatalf("rule %d: %s, message %q (the file has %d lines)", i+1, r, r.Message, lines)
			}
			if ref := r.Check(p.Identity, in); ref != nil && ref.Rule != r {
				t.Fatalf("rule %d refused as %s", i+1, ref.Rule)
			}
		}
		for _, name := range []string{"", "docs__search", "a", strings.Repeat("x", 128)} {
			// A deny wins over both allows.
			if p.deny.Match(name) && (p.Allows(tool(name, true)) || p.Allows(tool(name, false))) {
				t.Fatalf("%q is denied and allowed", name)
			}
			if p.Allows(tool(name, false)) && !p.Allows(tool(name, true)) {
				t.Fatalf("%q is allowed, but not when read-only", name)
			}
			if p.Allows(Item{Kind: Prompt, Name: name}) != p.Allows(tool(name, false)) {
				t.Fatalf("prompt %q and a tool of that name that writes differ", name)
			}
			want := name != "" && p.allowResources.Match(name)
			if got := p.Allows(Item{Kind: Resource, Name: name, Server: name}); got != want {
				t.Fatalf("resources of server %q: permitted %v, allow_resources says %v", name, got, want)
			}
		}
		variants := [][]byte{append(bytes.Clone(data), "\n# a comment\n"...)}
		if !bytes.HasPrefix(data, utf8BOM) {
			variants = append(variants, append(bytes.Clone(utf8BOM), data...))
		}
		for _, variant := range variants {
			q, err := Parse(file, variant)
			if err != nil || !p.sameAccess(q) {
				t.Fatalf("%q parses to %v, but %q to %v (%v)", data, p, variant, q, err)
			}
		}
		written, ok := writeOut(p)
		if !ok {
			return
		}
		q, err := Parse(file, written)
		if err != nil || !p.sameAccess(q) {
			t.Fatalf("%q parses to %v, but written out as %q to %v (%v)", data, p, written, q, err)
		}
	})
}

// writeOut renders p's rules as a policy file, each pattern a TOML basic
// string (JSON's string escapes are all TOML's too). It reports false for a
// pattern that is not valid UTF-8, which TOML cannot carry.
func writeOut(p *Policy) ([]byte, bool) {
	var b bytes.Buffer
	for k, pats := range p.patterns {
		b.WriteString(keyNames[k] + " = [")
		for i, s := range pats {
			if !utf8.ValidString(s) {
				return nil, false
			}
			if i > 0 {
				b.WriteString(", ")
			}
			q, _ := json.Marshal(s)
			b.Write(q)
		}
		b.WriteString("]\n")
	}
	for _, r := range p.rules {
		b.WriteString("[[rule]]\ntools = [")
		for i, s := range r.patterns {
			if i > 0 {
				b.WriteString(", ")
			}
			if !basicString(&b, s) {
				return nil, false
			}
		}
		b.WriteString("]\n" + r.Kind() + " = ")
		if !basicString(&b, r.expr) {
			return nil, false
		}
		if r.message != "" {
			b.WriteString("\nmessage = ")
			if !basicString(&b, r.message) {
				return nil, false
			}
		}
		b.WriteString("\n")
	}
	return b.Bytes(), true
}

// basicString writes s as a TOML basic string (JSON's string escapes are
// all TOML's too), reporting false for one that is not valid UTF-8.
func basicString(b *bytes.Buffer, s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	q, _ := json.Marshal(s)
	b.Write(q)
	return true
}
