package policy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// publicReader is the example of the README: reads only under /data/public.
const publicReader = `allow = ["fs__*"]

[[rule]]
tools = ["fs__read_*", "fs__list_directory"]
allow_if = 'args.path.startsWith("/data/public/") && !args.path.contains("..")'
message = "reader may read only under /data/public"

[[rule]]
tools = ["fs__*"]
deny_if = 'tool == "fs__write_file" && claims.team != "ops"'
`

// verdict runs every rule of p that applies to in.Tool, in order, as the
// mux does, and returns the first refusal.
func verdict(p *Policy, in Input) *Refusal {
	for _, r := range p.Rules() {
		if r.Applies(in.Tool) {
			if ref := r.Check(p.Identity, &in); ref != nil {
				return ref
			}
		}
	}
	return nil
}

func TestRuleVerdicts(t *testing.T) {
	p := mustParse(t, "policies/reader", publicReader)
	if n := len(p.Rules()); n != 2 {
		t.Fatalf("%d rules; want 2", n)
	}
	if r := p.Rules()[0]; r.Index != 1 || r.Line != 5 || r.File != testFile || r.String() != "rule 1 ("+testFile+":5)" {
		t.Errorf("rule 1 = %s, index %d, line %d", r, r.Index, r.Line)
	}
	args := func(path string) map[string]any { return map[string]any{"path": path} }
	tests := []struct {
		name    string
		in      Input
		refused int    // the rule that refuses; 0 for none
		errHas  string // in the refusal's Err; "" for a plain verdict
	}{
		{"inside", Input{Tool: "fs__read_text_file", Args: args("/data/public/a.txt")}, 0, ""},
		{"outside", Input{Tool: "fs__read_text_file", Args: args("/etc/passwd")}, 1, ""},
		{"dot dot", Input{Tool: "fs__read_text_file", Args: args("/data/public/../secret")}, 1, ""},
		{"prefix without slash", Input{Tool: "fs__read_media_file", Args: args("/data/publicity")}, 1, ""},
		{"list inside", Input{Tool: "fs__list_directory", Args: args("/data/public/")}, 0, ""},
		{"tool outside the globs", Input{Tool: "fs__search_files", Args: args("/etc")}, 0, ""},
		{"missing argument", Input{Tool: "fs__read_text_file", Args: map[string]any{}}, 1, "the arguments have no key path"},
		{"no arguments at all", Input{Tool: "fs__read_text_file"}, 1, "the arguments have no key path"},
		{"wrong type", Input{Tool: "fs__read_text_file", Args: map[string]any{"path": 3.0}}, 1, "no such overload"},
		{"deny_if true", Input{Tool: "fs__write_file", Claims: map[string]any{"team": "dev"}}, 2, ""},
		{"deny_if false", Input{Tool: "fs__write_file", Claims: map[string]any{"team": "ops"}}, 0, ""},
		{"deny_if without claims fails closed", Input{Tool: "fs__write_file"}, 2, "the caller's claims have no key team"},
		{"deny_if short-circuits", Input{Tool: "fs__edit_file"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := verdict(p, tt.in)
			switch {
			case tt.refused == 0 && ref != nil:
				t.Fatalf("refused: %v", ref)
			case tt.refused == 0:
				return
			case ref == nil:
				t.Fatalf("let through; want rule %d to refuse", tt.refused)
			case ref.Rule.Index != tt.refused:
				t.Fatalf("refused by rule %d; want %d", ref.Rule.Index, tt.refused)
			case tt.errHas == "" && ref.Err != nil, tt.errHas != "" && (ref.Err == nil || !strings.Contains(ref.Err.Error(), tt.errHas)):
				t.Fatalf("refusal error %v; want one with %q", ref.Err, tt.errHas)
			}
			if !strings.HasPrefix(ref.Error(), ref.Rule.Message) {
				t.Errorf("caller is told %q; want the rule's message %q first", ref.Error(), ref.Rule.Message)
			}
		})
	}
	if got, want := p.Rules()[0].Message, "reader may read only under /data/public"; got != want {
		t.Errorf("rule 1's message = %q; want %q", got, want)
	}
	if got := p.Rules()[1].Message; !strings.Contains(got, "rule 2") || !strings.Contains(got, `tool == "fs__write_file"`) {
		t.Errorf("rule 2's default message %q names neither the rule nor its condition", got)
	}
}

// A rule that cannot be evaluated says why, in words: which of the
// arguments and the caller's claims lacks the key it read, or else what
// went wrong on this call.
func TestRefusalSaysWhatIsMissing(t *testing.T) {
	tests := []struct {
		name, expr string
		in         Input
		want       string // what the caller is told after the rule's message
	}{
		{"a claims-only rule", `claims.team == "ops"`, Input{},
			" (policy rule 1 could not be evaluated: the caller's claims have no key team, so the call was refused)"},
		{"claims by index", `claims["team"] == "ops"`, Input{Claims: map[string]any{"org": "x"}},
			" (policy rule 1 could not be evaluated: the caller's claims have no key team, so the call was refused)"},
		{"an argument", `args.path.startsWith("/data/")`, Input{Claims: map[string]any{"path": "/data/x"}},
			" (policy rule 1 could not be evaluated: the arguments have no key path, so the call was refused)"},
		{"claims missing, arguments there", `args.path.startsWith(claims.home)`, Input{Args: map[string]any{"path": "/x"}},
			" (policy rule 1 could not be evaluated: the caller's claims have no key home, so the call was refused)"},
		{"a nested claim", `claims.org.team == "ops"`, Input{Claims: map[string]any{"org": map[string]any{}}},
			" (policy rule 1 could not be evaluated: the caller's claims have no key team, so the call was refused)"},
		{"an iteration variable", `claims.groups.exists(g, g.name == "ops")`, Input{Claims: map[string]any{"groups": []any{map[string]any{}}}},
			" (policy rule 1 could not be evaluated on this call, so the call was refused: no such key: name)"},
		{"a wrong type", `args.path.startsWith("/data/")`, Input{Args: map[string]any{"path": 3.0}},
			" (policy rule 1 could not be evaluated on this call, so the call was refused: no such overload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, "policies/reader", "[[rule]]\ntools = [\"*\"]\nallow_if = '"+tt.expr+"'\nmessage = \"m\"\n")
			tt.in.Tool = "fs__x"
			ref := verdict(p, tt.in)
			if ref == nil || ref.Err == nil {
				t.Fatalf("refusal %v; want one that could not be evaluated", ref)
			}
			if got := ref.Error(); !strings.HasPrefix(got, "m"+tt.want) {
				t.Errorf("caller is told %q; want it to start %q", got, "m"+tt.want)
			}
		})
	}
}

func TestRuleCompileErrors(t *testing.T) {
	rule := func(body string) string { return "allow = [\"*\"]\n\n[[rule]]\ntools = [\"*\"]\n" + body }
	tests := []struct {
		name string
		data string
		want []string
	}{
		{"syntax error", rule("allow_if = 'args.path.startsWith('\n"),
			[]string{"policies/reader.toml:5: allow_if: column 22: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"}},
		{"unknown variable", rule("message = \"m\"\ndeny_if = 'argz.x == 1'\n"),
			[]string{"policies/reader.toml:6: deny_if: column 1: undeclared reference to 'argz' (in container '')"}},
		{"not a bool", rule("allow_if = 'tool + \"x\"'\n"),
			[]string{"policies/reader.toml:5: allow_if must be a bool expression, not string (compare a field explicitly, as in args.flag == true)"}},
		{"dyn is not a bool", rule("allow_if = 'args.flag'\n"),
			[]string{"policies/reader.toml:5: allow_if must be a bool expression, not dyn (compare a field explicitly, as in args.flag == true)"}},
		{"type error", rule("allow_if = 'tool > 3'\n"),
			[]string{"policies/reader.toml:5: allow_if: column 6: found no matching overload for '_>_' applied to '(string, int)'"}},
		{"multi-line literal: the line of the error", rule("allow_if = '''\ntool == \"a\" &&\n  nosuch\n'''\n"),
			[]string{"policies/reader.toml:7: allow_if: column 3: undeclared reference to 'nosuch' (in container '')"}},
		{"multi-line with a continuation: the line of the string", rule("allow_if = \"\"\"tool == \"a\" && \\\n  nosuch\"\"\"\n"),
			[]string{"policies/reader.toml:5: allow_if: column 16: undeclared reference to 'nosuch' (in container '')"}},
		{"both", rule("allow_if = 'true'\ndeny_if = 'false'\n"),
			[]string{"policies/reader.toml:6: a [[rule]] has one of allow_if and deny_if, not both (allow_if is on line 5)"}},
		{"neither", rule("message = \"m\"\n"),
			[]string{"policies/reader.toml:3: rule 1 has neither allow_if nor deny_if"}},
		{"no tools", "[[rule]]\nallow_if = 'true'\n",
			[]string{"policies/reader.toml:1: rule 1 has no tools: say which tools it governs (tools = [\"*\"] for all)"}},
		{"empty tools", "[[rule]]\ntools = []\nallow_if = 'true'\n",
			[]string{"policies/reader.toml:2: tools is empty: the rule would govern no tool"}},
		{"bad tools", "[[rule]]\ntools = \"*\"\nallow_if = 'true'\n",
			[]string{"policies/reader.toml:2: tools must be an array of strings, not a string"}},
		{"empty expression", rule("allow_if = ' '\n"),
			[]string{"policies/reader.toml:5: allow_if is empty"}},
		{"expression not a string", rule("allow_if = true\n"),
			[]string{"policies/reader.toml:5: allow_if must be a string, not a boolean"}},
		{"unknown key", rule("allow_iff = 'true'\n"),
			[]string{"policies/reader.toml:3: rule 1 has neither allow_if nor deny_if",
				"policies/reader.toml:5: unknown key \"allow_iff\" in a [[rule]] (it has tools, allow_if, deny_if, message)"}},
		{"policy key after a rule", rule("allow_if = 'true'\ndeny = [\"x\"]\n"),
			[]string{"policies/reader.toml:6: deny inside the [[rule]] of line 3: the policy's own keys go before the first [[rule]]"}},
		{"duplicate key", rule("allow_if = 'true'\nmessage = 'a'\nmessage = 'b'\n"),
			[]string{"policies/reader.toml:7: duplicate key \"message\" in a [[rule]] (first set on line 6)"}},
		{"[rule]", "[rule]\ntools = [\"*\"]\n",
			[]string{"policies/reader.toml:1: [rule] must be written [[rule]]: a policy has a list of rules", "policies/reader.toml:2: unknown key \"tools\""}},
		{"both, and the second does not compile", rule("allow_if = 'true'\ndeny_if = 'nosuch'\n"),
			[]string{"policies/reader.toml:6: a [[rule]] has one of allow_if and deny_if, not both (allow_if is on line 5)",
				"policies/reader.toml:6: deny_if: column 1: undeclared reference to 'nosuch' (in container '')"}},
		{"every problem of the file in one go",
			"alow = [\"x\"]\n\n[[rule]]\ntools = [\"*\"]\nallow_if = 'true'\ndeny_if = 'false'\n" +
				"\n[[rule]]\ntools = [\"*\"]\nallow_if = 'args.path.startsWith('\n" +
				"\n[[rule]]\ntools = [\"*\"]\ndeny_if = 'tool > 3'\n",
			[]string{"policies/reader.toml:1: unknown key \"alow\"",
				"policies/reader.toml:6: a [[rule]] has one of allow_if and deny_if, not both (allow_if is on line 5)",
				"policies/reader.toml:10: allow_if: column 22: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
				"policies/reader.toml:14: deny_if: column 6: found no matching overload for '_>_' applied to '(string, int)'"}},
		{"every rule's errors", rule("allow_if = 'nosuch'\n") + "[[rule]]\ntools = [\"*\"]\ndeny_if = '1'\n",
			[]string{"policies/reader.toml:5: allow_if: column 1: undeclared reference to 'nosuch' (in container '')",
				"policies/reader.toml:8: deny_if must be a bool expression, not int (compare a field explicitly, as in args.flag == true)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(testFile, []byte(tt.data))
			if err == nil {
				t.Fatalf("Parse = %v; want an error", p)
			}
			es, ok := errors.AsType[Errors](err)
			if !ok {
				t.Fatalf("error %q (%T) is not Errors", err, err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestRuleCostLimit(t *testing.T) {
	p := mustParse(t, "policies/reader", `[[rule]]
tools = ["*"]
allow_if = 'args.items.all(a, args.items.all(b, args.items.all(c, a + b + c >= 0.0)))'
`)
	items := make([]any, 1000)
	for i := range items {
		items[i] = float64(i)
	}
	r := p.Rules()[0]
	// A short list passes: the limit is on work done, not on the expression.
	if ref := r.Check("reader", &Input{Tool: "x", Args: map[string]any{"items": items[:10]}}); ref != nil {
		t.Fatalf("10 items: %v", ref)
	}
	ref := r.Check("reader", &Input{Tool: "x", Args: map[string]any{"items": items}})
	if ref == nil || !errors.Is(ref.Err, ErrCostLimit) {
		t.Fatalf("a billion steps: %v; want ErrCostLimit", ref)
	}
	if want := fmt.Sprint(CostLimit); !strings.Contains(ref.Error(), want) {
		t.Errorf("caller is told %q, without the limit", ref.Error())
	}
}

func TestRuleReads(t *testing.T) {
	tests := []struct {
		expr                 string
		args, claims, onTool bool
	}{
		{`args.path == "/"`, true, false, false},
		{`has(args.path)`, true, false, false},
		{`claims.team == "ops"`, false, true, false},
		{`"ops" in claims`, false, true, false},
		{`identity == "reader"`, false, false, false},
		{`tool.startsWith("fs__") && server == "fs"`, false, false, true},
		{`server == "fs" || claims.admin == true`, false, true, true},
		{`true`, false, false, false},
		{`[1, 2].all(x, x > 0) && claims.size() > 0`, false, true, false},
		// An iteration variable named args is taken for the variable:
		// the rule is treated as reading the arguments, the safe side.
		{`[1].all(args, args > 0)`, true, false, false},
	}
	for _, tt := range tests {
		p := mustParse(t, "policies/reader", "[[rule]]\ntools = [\"*\"]\nallow_if = '"+tt.expr+"'\n")
		r := p.Rules()[0]
		if r.ReadsArgs() != tt.args || r.ReadsClaims() != tt.claims || r.ReadsTool() != tt.onTool {
			t.Errorf("%s: reads args %v, claims %v, tool %v; want %v, %v, %v", tt.expr,
				r.ReadsArgs(), r.ReadsClaims(), r.ReadsTool(), tt.args, tt.claims, tt.onTool)
		}
	}
}

func TestRuleVariables(t *testing.T) {
	p := mustParse(t, "policies/reader", `[[rule]]
tools = ["*"]
allow_if = 'identity == "reader" && tool == "fs__x" && server == "fs" && claims.n == 3 && args.n < 10 && size(claims.groups) == 2'
`)
	in := Input{Tool: "fs__x", Server: "fs", Args: map[string]any{"n": 4.0},
		Claims: map[string]any{"n": 3.0, "groups": []any{"a", "b"}}}
	if ref := verdict(p, in); ref != nil {
		t.Fatalf("refused: %v", ref)
	}
	in.Server = "other"
	if verdict(p, in) == nil {
		t.Fatal("let through with another server")
	}
}

func TestRuleGlobs(t *testing.T) {
	p := mustParse(t, "policies/reader", `[[rule]]
tools = ["fs__read_*", "gh__?et", "exact"]
deny_if = 'true'
`)
	for name, want := range map[string]bool{
		"fs__read_file": true, "fs__read_": true, "fs__write": false,
		"gh__get": true, "gh__set": true, "gh__gett": false, "exact": true, "exactly": false,
	} {
		if got := p.Rules()[0].Applies(name); got != want {
			t.Errorf("Applies(%q) = %v; want %v", name, got, want)
		}
	}
}

func TestRulesSameAccess(t *testing.T) {
	base := mustParse(t, "policies/reader", publicReader)
	same := []string{
		"# a comment\n" + publicReader,
		strings.Replace(publicReader, `["fs__read_*", "fs__list_directory"]`, `["fs__list_directory", "fs__read_*", "fs__read_*"]`, 1),
		strings.Replace(publicReader, "[[rule]]\ntools", "\n\n[[rule]]\ntools", 1),
	}
	for _, s := range same {
		if !base.sameAccess(mustParse(t, "policies/reader", s)) {
			t.Errorf("%q differs from the base", s)
		}
	}
	differ := []string{
		strings.Replace(publicReader, "reader may read", "reader can read", 1),
		strings.Replace(publicReader, "deny_if", "allow_if", 1),
		strings.Replace(publicReader, `"/data/public/"`, `"/data/pub/"`, 1),
		strings.Replace(publicReader, `"fs__list_directory"`, `"fs__list_*"`, 1),
		publicReader + "[[rule]]\ntools = [\"*\"]\nallow_if = 'true'\n",
		`allow = ["fs__*"]`,
	}
	for _, s := range differ {
		if base.sameAccess(mustParse(t, "policies/reader", s)) {
			t.Errorf("%q has the same rules as the base", s)
		}
	}
}

func TestRulesKeptAcrossReload(t *testing.T) {
	w := startWatch(t, policyDir(t, map[string]string{"reader.toml": publicReader, "other.toml": `allow = ["a__*"]`}))
	good := w.store.Current().For("reader")
	replaceFile(t, w.path("reader.toml"), strings.Replace(publicReader, "args.path.contains", "args.path.contain", 1))
	replaceFile(t, w.path("other.toml"), `allow = ["b__*"]`)
	s := w.waitFor("other's change", allows("other", "b__x"))
	if s.For("reader") != good {
		t.Errorf("reader's policy = %v; want the last good one", s.For("reader"))
	}
	wantErr := w.path("reader.toml") + ":5: allow_if: column 60: undeclared reference to 'contain' (in container '')"
	if err := w.store.LastError(); err == nil || err.Error() != wantErr {
		t.Errorf("LastError = %v; want %s", err, wantErr)
	}
	w.logs.wantError(t, w.path("reader.toml"), 5, wantErr)
}
