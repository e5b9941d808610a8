package policy

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const testFile = "policies/reader.toml"

func TestParse(t *testing.T) {
	type rules struct{ allow, allowReadOnly, deny, allowResources []string }
	tests := []struct {
		name string
		data string
		want rules
	}{
		{name: "empty", data: ""},
		{name: "comments only", data: "# nothing yet\n\n  # really\n"},
		{name: "blank lines only", data: "\n\n\r\n"},
		{
			name: "all keys",
			data: `allow = ["docs__*"]
allow_read_only = ["tickets__*"]
deny = ["*__delete_*"]
allow_resources = ["docs", "tick*"]
`,
			want: rules{[]string{"docs__*"}, []string{"tickets__*"}, []string{"*__delete_*"}, []string{"docs", "tick*"}},
		},
		{
			name: "allow_resources alone, multi-line, sorted",
			data: "allow_resources = [\n  'wiki',\n  \"docs\", # main\n  \"wiki\",\n]\n",
			want: rules{allowResources: []string{"docs", "wiki"}},
		},
		{
			name: "multi-line arrays with comments and trailing comma",
			data: `# reader may read
allow = [
  "docs__search", # the main one
  'docs__get',
]
deny = [] # nothing yet
`,
			want: rules{allow: []string{"docs__get", "docs__search"}},
		},
		{
			name: "sorted and de-duplicated",
			data: `allow = ["b", "a", "b"]`,
			want: rules{allow: []string{"a", "b"}},
		},
		{name: "quoted key", data: `"allow" = ["x"]`, want: rules{allow: []string{"x"}}},
		{name: "CRLF", data: "allow = [\r\n  \"x\",\r\n]\r\n", want: rules{allow: []string{"x"}}},
		{name: "byte order mark", data: "\ufeffdeny = [\"x\"]\n", want: rules{deny: []string{"x"}}},
		{name: "no trailing newline", data: `allow_read_only = ["*"]`, want: rules{allowReadOnly: []string{"*"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(testFile, []byte(tt.data))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.Identity != "reader" || p.File != testFile {
				t.Errorf("Identity, File = %q, %q; want reader, %q", p.Identity, p.File, testFile)
			}
			got := rules{p.patterns[keyAllow], p.patterns[keyAllowReadOnly], p.patterns[keyDeny], p.patterns[keyAllowResources]}
			for i, pair := range [][2][]string{{got.allow, tt.want.allow}, {got.allowReadOnly, tt.want.allowReadOnly}, {got.deny, tt.want.deny}, {got.allowResources, tt.want.allowResources}} {
				if !slices.Equal(pair[0], pair[1]) {
					t.Errorf("%s = %q; want %q", keyNames[i], pair[0], pair[1])
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string // each problem, as FILE:LINE: message
	}{
		{
			name: "unknown key",
			data: "allow = [\"x\"]\n\nalow = [\"y\"]\n",
			want: []string{`policies/reader.toml:3: unknown key "alow"`},
		},
		{
			// go-toml's decoder would accept this as allow, and the later
			// of allow and Allow would silently win.
			name: "key in the wrong case",
			data: "deny = [\"*__delete_*\"]\nDeny = []\n",
			want: []string{`policies/reader.toml:2: unknown key "Deny"`},
		},
		{
			name: "dotted key",
			data: "# x\nallow.docs = [\"x\"]\n",
			want: []string{`policies/reader.toml:2: unknown key "allow.docs"`},
		},
		{
			name: "table",
			data: "allow = []\n[allow]\nx = 1\n",
			want: []string{
				`policies/reader.toml:2: unexpected table [allow]: a policy has only the keys allow, allow_read_only, deny, allow_resources, always, catalog and [[rule]] tables`,
				`policies/reader.toml:3: unknown key "x"`,
			},
		},
		{
			name: "array of tables",
			data: "\n[[rules]]\n",
			want: []string{`policies/reader.toml:2: unexpected table [[rules]]: the only tables of a policy are [[rule]]`},
		},
		{
			name: "string, not array",
			data: "\nallow = \"docs__*\"\n",
			want: []string{`policies/reader.toml:2: allow must be an array of strings, not a string`},
		},
		{
			name: "inline table",
			data: "deny = {}\n",
			want: []string{`policies/reader.toml:1: deny must be an array of strings, not a table`},
		},
		{
			name: "value on a later line than its key",
			data: "allow = [\n  \"a\",\n  2,\n]\n",
			want: []string{`policies/reader.toml:3: allow must contain only strings, not an integer`},
		},
		{
			// go-toml's decoder reports this one at line 1.
			name: "nested array",
			data: "\n\nallow_read_only = [\n  [\"a\"],\n]\n",
			want: []string{`policies/reader.toml:4: allow_read_only must contain only strings, not an array`},
		},
		{
			name: "nested empty array falls back to the key's line",
			data: "\n\nallow = [\n  [],\n]\n",
			want: []string{`policies/reader.toml:3: allow must contain only strings, not an array`},
		},
		{
			name: "float",
			data: "allow = [1.5]\n",
			want: []string{`policies/reader.toml:1: allow must contain only strings, not a float`},
		},
		{
			name: "date",
			data: "\ndeny = 2026-01-01\n",
			want: []string{`policies/reader.toml:2: deny must be an array of strings, not a date or time`},
		},
		{
			name: "boolean",
			data: "allow = [true]\n",
			want: []string{`policies/reader.toml:1: allow must contain only strings, not a boolean`},
		},
		{
			name: "empty pattern",
			data: "allow = [\n  \"docs__*\",\n  \"\",\n]\n",
			want: []string{`policies/reader.toml:3: empty pattern in allow`},
		},
		{
			name: "empty literal pattern",
			data: "deny = ['']",
			want: []string{`policies/reader.toml:1: empty pattern in deny`},
		},
		{
			name: "duplicate key",
			data: "allow = [\"a\"]\n\"allow\" = [\"b\"]\n",
			want: []string{`policies/reader.toml:2: duplicate key "allow" (first set on line 1)`},
		},
		{
			name: "allow_resources is a list",
			data: "allow = []\nallow_resources = \"docs\"\n",
			want: []string{`policies/reader.toml:2: allow_resources must be an array of strings, not a string`},
		},
		{
			name: "allow_resources holds strings",
			data: "allow_resources = [\n  \"docs\",\n  {alias = \"x\"},\n  '',\n]\n",
			want: []string{
				`policies/reader.toml:3: allow_resources must contain only strings, not a table`,
				`policies/reader.toml:4: empty pattern in allow_resources`,
			},
		},
		{
			name: "allow_resources twice",
			data: "allow_resources = [\"a\"]\n\nallow_resources = [\"b\"]\n",
			want: []string{`policies/reader.toml:3: duplicate key "allow_resources" (first set on line 1)`},
		},
		{
			name: "resource keys that do not exist",
			data: "allow_resource = [\"docs\"]\nallow_prompts = [\"*\"]\nAllow_Resources = []\n[allow_resources]\n",
			want: []string{
				`policies/reader.toml:1: unknown key "allow_resource"`,
				`policies/reader.toml:2: unknown key "allow_prompts"`,
				`policies/reader.toml:3: unknown key "Allow_Resources"`,
				`policies/reader.toml:4: unexpected table [allow_resources]: a policy has only the keys allow, allow_read_only, deny, allow_resources, always, catalog and [[rule]] tables`,
			},
		},
		{
			name: "catalog not a mode, twice",
			data: "catalog = \"searching\"\ncatalog = 1\ncatalog = \"search\"\ncatalog = \"full\"\n",
			want: []string{
				`policies/reader.toml:1: catalog must be one of ["full" "search" "auto"]`,
				`policies/reader.toml:2: catalog must be one of ["full" "search" "auto"]`,
				`policies/reader.toml:4: duplicate key "catalog" (first set on line 3)`,
			},
		},
		{
			name: "every problem is reported",
			data: "alow = []\nallow = [\"\"]\ndeny = 1\n",
			want: []string{
				`policies/reader.toml:1: unknown key "alow"`,
				`policies/reader.toml:2: empty pattern in allow`,
				`policies/reader.toml:3: deny must be an array of strings, not an integer`,
			},
		},
		{
			name: "syntax error",
			data: "allow = []\ndeny = [\"a\"] x\n",
			want: []string{`policies/reader.toml:2: expected newline but got U+0078 'x'`},
		},
		{
			name: "syntax error hides other problems",
			data: "alow = []\ndeny = [\"a\n",
			want: []string{`policies/reader.toml:2: basic strings cannot have new lines`},
		},
		{
			name: "unterminated array",
			data: "allow = []\ndeny = [\n  \"a\",\n",
			want: []string{`policies/reader.toml:3: array is incomplete`},
		},
		{
			name: "missing value",
			data: "allow =",
			want: []string{`policies/reader.toml:1: expected value, not end of input`},
		},
		{
			name: "invalid UTF-8",
			data: "# ok\nallow = [\"\xff\"]\n",
			want: []string{`policies/reader.toml:2: invalid UTF-8 character in basic string`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(testFile, []byte(tt.data))
			if err == nil {
				t.Fatalf("Parse = %v; want an error", p)
			}
			if p != nil {
				t.Errorf("Parse returned a policy with its error")
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
			if err.Error() != strings.Join(tt.want, "\n") {
				t.Errorf("Error() = %q", err)
			}
			if e, ok := errors.AsType[*Error](err); !ok || e.File != testFile || e.Line == 0 {
				t.Errorf("errors.As(*Error) = %+v, %v; want the first problem", e, ok)
			}
		})
	}
}

func TestParseFileName(t *testing.T) {
	for _, file := range []string{"reader", "reader.yaml", ".reader.toml", ".toml", "dir/"} {
		if _, err := Parse(file, nil); err == nil {
			t.Errorf("Parse(%q) succeeded; want an error", file)
		}
	}
	p, err := Parse("/etc/mcpmux/policies/ci-bot.toml", nil)
	if err != nil || p.Identity != "ci-bot" {
		t.Errorf("Parse = %v, %v; want identity ci-bot", p, err)
	}
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reader.toml")
	writeFile(t, path, "allow = [\"docs__*\"]\n")
	p, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Identity != "reader" || p.File != path || !p.Allows(tool("docs__x", false)) {
		t.Errorf("ParseFile = %+v", p)
	}

	writeFile(t, path, "\nallow = 1\n")
	_, err = ParseFile(path)
	if want := path + ":2: allow must be an array of strings, not an integer"; err == nil || err.Error() != want {
		t.Errorf("ParseFile error = %v; want %s", err, want)
	}

	if _, err := ParseFile(filepath.Join(dir, "missing.toml")); err == nil {
		t.Error("ParseFile of a missing file succeeded")
	}

	big := filepath.Join(dir, "big.toml")
	writeFile(t, big, "#"+strings.Repeat("x", maxFileSize))
	if _, err := ParseFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ParseFile of a huge file: %v; want a size error", err)
	}
}

func TestAllows(t *testing.T) {
	p, err := Parse(testFile, []byte(`
allow = ["docs__*", "wiki__page_get", "ask"]
allow_read_only = ["tickets__*", "tpl__*"]
deny = ["*__delete_*", "docs__admin", "docs"]
allow_resources = ["docs", "tick*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(name string) Item { return Item{Kind: Prompt, Name: name} }
	resource := func(server string) Item { return Item{Kind: Resource, Server: server} }
	tests := []struct {
		it   Item
		want bool
	}{
		{tool("docs__search", false), true},
		{tool("docs__search", true), true},
		{tool("wiki__page_get", false), true},
		{tool("wiki__page_get_all", false), false},
		{tool("tickets__list", true), true},
		{tool("tickets__list", false), false}, // read-only grant, but the tool writes
		{tool("tickets__create", false), false},
		{tool("docs__delete_page", false), false},  // deny wins over allow
		{tool("tickets__delete_all", true), false}, // deny wins over allow_read_only
		{tool("docs__admin", true), false},
		{tool("other__search", true), false},
		{tool("", true), false},
		{tool("docs__", false), true},
		{Item{Kind: Tool, Name: "docs__search", Server: "elsewhere"}, true}, // tools go by name alone
		{Item{Kind: Tool, Name: "other__x", Server: "docs"}, false},         // allow_resources grants no tools

		{prompt("docs__summarize"), true},
		{prompt("ask"), true},                 // an unprefixed child's prompt
		{prompt("docs__delete_draft"), false}, // deny wins
		{prompt("docs__admin"), false},
		{prompt("tpl__greeting"), false}, // allow_read_only never grants a prompt
		{Item{Kind: Prompt, Name: "tpl__greeting", ReadOnly: true}, false},
		{prompt("tickets__x"), false},
		{Item{Kind: Prompt, Name: "other__x", Server: "docs"}, false}, // allow_resources grants no prompts
		{prompt(""), false},

		{resource("docs"), true},
		{resource("tickets"), true},
		{resource("tick"), true},
		{resource("wiki"), false},  // allowed tools, but no resources
		{resource("docs2"), false}, // globs match whole aliases
		{resource(""), false},
		{Item{Kind: Resource, Name: "docs__delete_x", Server: "docs"}, true}, // deny is over names, not resources
		{Item{Kind: Resource, Name: "docs__search", Server: "wiki"}, false},  // resources go by server alone

		{Item{Name: "docs__search", Server: "docs"}, false}, // no kind
		{Item{Kind: Resource + 1, Name: "docs__search", Server: "docs"}, false},
	}
	for _, tt := range tests {
		if got := p.Allows(tt.it); got != tt.want {
			t.Errorf("Allows(%+v) = %v; want %v", tt.it, got, tt.want)
		}
	}

	var nilPolicy *Policy
	empty := mustParse(t, "reader", "")
	for _, it := range []Item{tool("docs__search", true), prompt("docs__summarize"), resource("docs")} {
		if nilPolicy.Allows(it) {
			t.Errorf("nil policy permits %+v", it)
		}
		if empty.Allows(it) {
			t.Errorf("empty policy permits %+v", it)
		}
	}
}

// Without allow_resources nobody sees resources, however much else is
// allowed.
func TestNoResourcesWithoutAllowResources(t *testing.T) {
	p := mustParse(t, "admin", "allow = [\"*\"]\nallow_read_only = [\"*\"]\n")
	if p.Allows(Item{Kind: Resource, Name: "docs__x", Server: "docs"}) {
		t.Error(`allow = ["*"] grants resources`)
	}
	if !p.Allows(Item{Kind: Prompt, Name: "docs__x"}) || !p.Allows(tool("docs__x", false)) {
		t.Error(`allow = ["*"] does not grant tools and prompts`)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Tool: "tool", Prompt: "prompt", Resource: "resource", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q; want %q", k, got, want)
		}
	}
}

func TestAllowsDoesNotAllocate(t *testing.T) {
	p, err := Parse(testFile, []byte(`
allow = ["docs__*", "wiki__page_?et"]
allow_read_only = ["*tickets*__*"]
deny = ["*__delete_*"]
allow_resources = ["do?s", "tick*", "*-files"]
`))
	if err != nil {
		t.Fatal(err)
	}
	// Long names too: real tool names often pass 32 characters.
	names := []string{
		"docs__search",
		"wiki__page_get",
		"tickets__list",
		"ünïcödé__tööl",
		"github__create_pull_request_review_comment",
	}
	aliases := []string{"docs", "tickets", "shared-files", "wiki", "ünïcödé"}
	var items []Item
	for _, name := range names {
		items = append(items, tool(name, true), tool(name, false), Item{Kind: Prompt, Name: name})
	}
	for _, alias := range aliases {
		items = append(items, Item{Kind: Resource, Name: "docs__search", Server: alias})
	}
	for _, it := range items {
		if n := testing.AllocsPerRun(100, func() { p.Allows(it) }); n != 0 {
			t.Errorf("Allows(%+v) allocates %v times per call", it, n)
		}
	}
}

func BenchmarkAllows(b *testing.B) {
	p, err := Parse(testFile, []byte(`
allow = ["docs__*", "wiki__*"]
allow_read_only = ["tickets__*"]
deny = ["*__delete_*"]
allow_resources = ["docs", "tick*"]
`))
	if err != nil {
		b.Fatal(err)
	}
	for _, it := range []Item{
		tool("tickets__list_open", true),
		{Kind: Prompt, Name: "wiki__summarize_page"},
		{Kind: Resource, Server: "tickets"},
	} {
		b.Run(it.Kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Allows(it)
			}
		})
	}
}

func TestErrorWithoutLine(t *testing.T) {
	e := &Error{File: testFile, Msg: "something"}
	if got, want := e.Error(), testFile+": something"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

func TestPolicyString(t *testing.T) {
	p := mustParse(t, "reader", "allow_resources = [\"tick*\", \"docs\"]\ndeny = [\"b\"]\nallow = [\"x\", \"a\"]\n")
	if got, want := p.String(), `allow = ["a", "x"]; deny = ["b"]; allow_resources = ["docs", "tick*"]`; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
	var nilPolicy *Policy
	if got := nilPolicy.String(); got != "<no policy>" {
		t.Errorf("nil String() = %s", got)
	}
}

// catalog and always are read, and count in what a policy grants: an
// edit of either is a change of the identity's view.
func TestCatalogAndAlways(t *testing.T) {
	p, err := Parse(testFile, []byte("allow = [\"*\"]\ncatalog = \"search\"\nalways = [\"docs__search\", \"fs__read_*\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Catalog() != "search" || !p.Always("fs__read_file") || p.Always("fs__write_file") || !p.HasAlways() {
		t.Errorf("catalog %q, always(fs__read_file) %v, always(fs__write_file) %v", p.Catalog(), p.Always("fs__read_file"), p.Always("fs__write_file"))
	}
	for _, other := range []string{"allow = [\"*\"]\ncatalog = \"auto\"\nalways = [\"docs__search\", \"fs__read_*\"]\n", "allow = [\"*\"]\ncatalog = \"search\"\n"} {
		q, err := Parse(testFile, []byte(other))
		if err != nil {
			t.Fatal(err)
		}
		if p.sameAccess(q) {
			t.Errorf("%q has the same access as %q", other, p)
		}
	}
	var none *Policy
	if none.Catalog() != "" || none.Always("x") || none.HasAlways() {
		t.Error("no policy has a catalog mode or always patterns")
	}
}
