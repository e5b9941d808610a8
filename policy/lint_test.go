package policy

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestUnmatchable(t *testing.T) {
	aliases := []string{"docs", "gh-enterprise"}
	tests := []struct {
		name    string
		sep     string
		pattern string
		want    string // the warning's message; "" for none
	}{
		{"a server's tools", "__", "docs__*", ""},
		{"everything", "__", "*", ""},
		{"every server's", "__", "*__delete_*", ""},
		{"? in the alias", "__", "?ocs__x", ""},
		{"a start of an alias", "__", "gh-*", ""},
		{"one tool", "__", "gh-enterprise__delete_repo", ""},
		{"single separator", "_", "docs_*", ""},
		{"a dot", "__", "docs__delete.repo", `allow pattern "docs__delete.repo" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`},
		{"a class", "__", "docs__delete_[a-z]*", `allow pattern "docs__delete_[a-z]*" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '[' (a pattern has no [...] classes, only * and ?)`},
		{"a space", "__", "docs__get doc", `allow pattern "docs__get doc" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not ' '`},
		{"no such server", "__", "gh__*", `allow pattern "gh__*" can never match: no server gh`},
		{"no such server, one tool", "__", "gh__delete_repo", `allow pattern "gh__delete_repo" can never match: no server gh`},
		{"upper case alias", "__", "DOCS__*", `allow pattern "DOCS__*" can never match: no server DOCS`},
		{"the other separator", "__", "docs_x*", `allow pattern "docs_x*" can never match: no exposed name starts with "docs_x" (each starts with a server's alias and "__")`},
		{"an alias alone", "__", "docs", `allow pattern "docs" can never match: an exposed name is a server's alias, "__" and a tool or prompt name`},
		{"no tool name", "_", "docs_", `allow pattern "docs_" can never match: an exposed name is a server's alias, "_" and a tool or prompt name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The pattern on line 3, after a comment and another key.
			data := "# reader\ndeny = []\nallow = [\n  \"" + tt.pattern + "\",\n]\n"
			p, err := Parse(testFile, []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			ws := p.Unmatchable(Servers{Separator: tt.sep, Aliases: aliases})
			if tt.want == "" {
				if len(ws) != 0 {
					t.Errorf("warnings %v, want none", ws)
				}
				return
			}
			want := Warning{File: testFile, Line: 4, Msg: tt.want}
			if len(ws) != 1 || ws[0] != want {
				t.Errorf("warnings %v, want [%v]", ws, want)
			}
		})
	}
}

// A [[rule]]'s tools patterns are checked as allow's are: a typo there
// switches the rule off, which removes a restriction.
func TestUnmatchableRuleTools(t *testing.T) {
	data := `allow = ["docs__*"]

[[rule]]
tools = ["docs__read_*"]
allow_if = 'args.path.startsWith("/pub/")'

[[rule]]
tools = [
  "doc__read_*",
  "docs__read.text",
]
deny_if = 'claims.team != "ops"'
`
	p, err := Parse(testFile, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Warning{
		{File: testFile, Line: 9, Msg: `rule 2: tools pattern "doc__read_*" can never match: no server doc`},
		{File: testFile, Line: 10, Msg: `rule 2: tools pattern "docs__read.text" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`},
	}
	if ws := p.Unmatchable(Servers{Separator: "__", Aliases: []string{"docs"}}); !slices.Equal(ws, want) {
		t.Errorf("warnings %v, want %v", ws, want)
	}
}

// allow_resources names servers: each pattern is checked against the
// aliases themselves, and names that look like tool names or URIs are
// explained.
func TestUnmatchableResources(t *testing.T) {
	aliases := []string{"docs", "gh-enterprise", "tickets2"}
	tests := []struct {
		name    string
		pattern string
		aliases []string
		want    string // the warning's message; "" for none
	}{
		{"an alias", "docs", aliases, ""},
		{"every server", "*", aliases, ""},
		{"a glob over aliases", "tick*", aliases, ""},
		{"? and -", "gh-?nterprise", aliases, ""},
		{"no aliases known", "wiki", nil, ""},
		{"no such server", "wiki", aliases, `allow_resources pattern "wiki" can never match: no server wiki`},
		{"a glob matching no alias", "wiki*", aliases, `allow_resources pattern "wiki*" can never match: it matches no server's alias`},
		{"too long for any alias", "docs?", aliases, `allow_resources pattern "docs?" can never match: it matches no server's alias`},
		{"a tool glob", "docs__*", aliases, `allow_resources pattern "docs__*" can never match: server aliases have only a-z, 0-9 and '-', not '_' (allow_resources names servers, not resources)`},
		{"a URI", "mcpmux://docs/*", aliases, `allow_resources pattern "mcpmux://docs/*" can never match: server aliases have only a-z, 0-9 and '-', not ':' (allow_resources names servers, not resources)`},
		{"upper case", "Docs", nil, `allow_resources pattern "Docs" can never match: server aliases have only a-z, 0-9 and '-', not 'D' (aliases are lower case)`},
		{"a class", "doc[s]", aliases, `allow_resources pattern "doc[s]" can never match: server aliases have only a-z, 0-9 and '-', not '[' (a pattern has no [...] classes, only * and ?)`},
		{"not ASCII", "döcs", aliases, `allow_resources pattern "döcs" can never match: server aliases have only a-z, 0-9 and '-', not 'ö' (allow_resources names servers, not resources)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := "allow = [\"docs__*\"]\nallow_resources = [\n  \"" + tt.pattern + "\",\n]\n"
			p, err := Parse(testFile, []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			ws := p.Unmatchable(Servers{Separator: "__", Aliases: tt.aliases})
			if tt.want == "" {
				if len(ws) != 0 {
					t.Errorf("warnings %v, want none", ws)
				}
				return
			}
			want := Warning{File: testFile, Line: 3, Msg: tt.want}
			if len(ws) != 1 || ws[0] != want {
				t.Errorf("warnings %v, want [%v]", ws, want)
			}
		})
	}
}

// With a server that exposes names without its alias, any valid name can be
// exposed: only characters are checked, for names, and aliases still are,
// for resources.
func TestUnmatchableUnprefixed(t *testing.T) {
	p := mustParse(t, "reader", "allow = [\"search\", \"gh__*\", \"a.b\"]\nallow_resources = [\"gh\"]\n")
	var got []string
	for _, w := range p.Unmatchable(Servers{Separator: "__", Aliases: []string{"docs"}, Unprefixed: true}) {
		got = append(got, w.Msg)
	}
	want := []string{
		`allow pattern "a.b" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`,
		`allow_resources pattern "gh" can never match: no server gh`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
}

// Both problems of one pattern are reported, each pattern at its own line,
// in file order, and a set reports every identity's.
func TestUnmatchableSet(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "reader.toml"), "allow = [\"docs__*\", \"gh__x.y\"]\n\ndeny = [\n  \"docs__ok\",\n  \"docs__a/b\",\n]\n")
	writeFile(t, filepath.Join(dir, "admin.toml"), "allow_read_only = ['tickets__*']\nallow_resources = ['do*', 'tickets']\n")
	set, errs := LoadDir(dir)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, w := range set.Unmatchable(Servers{Separator: "__", Aliases: []string{"docs"}}) {
		got = append(got, w.String())
	}
	admin, reader := filepath.Join(dir, "admin.toml"), filepath.Join(dir, "reader.toml")
	want := []string{
		admin + `:1: warning: allow_read_only pattern "tickets__*" can never match: no server tickets`,
		admin + `:2: warning: allow_resources pattern "tickets" can never match: no server tickets`,
		reader + `:1: warning: allow pattern "gh__x.y" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`,
		reader + `:1: warning: allow pattern "gh__x.y" can never match: no server gh`,
		reader + `:5: warning: deny pattern "docs__a/b" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '/'`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
	if ws := (*Set)(nil).Unmatchable(Servers{Separator: "__", Aliases: []string{"docs"}}); ws != nil {
		t.Errorf("nil set: %v", ws)
	}
}

// warnings returns the warnings logged so far, as FILE:LINE: message.
func (b *syncBuffer) warnings(t *testing.T) []string {
	t.Helper()
	b.mu.Lock()
	logs := b.buf.String()
	b.mu.Unlock()
	var out []string
	for l := range strings.Lines(logs) {
		var e struct {
			Level, File, Message string
			Line                 int
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if e.Level == "warn" {
			out = append(out, fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Message))
		}
	}
	return out
}

// A watched store warns about the policies it has, and then about each
// policy a reload changes, once.
func TestStoreWarnsUnmatchable(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": `allow = ["gh__*"]`}))
	w.store.WarnUnmatchable(Servers{Separator: "__", Aliases: []string{"docs"}})
	reader := w.path("reader.toml")
	want := []string{reader + `:1: allow pattern "gh__*" can never match: no server gh`}
	if got := w.logs.warnings(t); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}

	replaceFile(t, reader, "allow = [\"docs__*\"]\ndeny = [\"docs__a.b\"]\n")
	w.waitFor("reader's change", allows("reader", "docs__x"))
	want = append(want, reader+`:2: deny pattern "docs__a.b" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`)
	if got := w.logs.warnings(t); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}

	// A reload that changes only other says nothing more about reader.
	replaceFile(t, w.path("other.toml"), `allow = ["docs__*"]`)
	w.waitFor("other's policy", allows("other", "docs__x"))
	if got := w.logs.warnings(t); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}

	// An edit of allow_resources alone is a change, and warned about.
	replaceFile(t, reader, "allow = [\"docs__*\"]\ndeny = [\"docs__a.b\"]\nallow_resources = [\"docs\", \"wiki\"]\n")
	w.waitFor("reader's resources", func(s *Set) bool { return s.For("reader").Allows(Item{Kind: Resource, Server: "docs"}) })
	want = append(want, want[1], reader+`:3: allow_resources pattern "wiki" can never match: no server wiki`)
	if got := w.logs.warnings(t); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}

	// So is a rule whose tools match nothing.
	replaceFile(t, reader, "allow = [\"docs__*\"]\n\n[[rule]]\ntools = [\"doc__*\"]\ndeny_if = 'claims.team != \"ops\"'\n")
	w.waitFor("reader's rule", func(s *Set) bool { return len(s.For("reader").Rules()) == 1 })
	want = append(want, reader+`:4: rule 1: tools pattern "doc__*" can never match: no server doc`)
	if got := w.logs.warnings(t); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q", got, want)
	}
}
