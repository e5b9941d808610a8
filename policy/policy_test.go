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
	type rules struct{ allow, allowReadOnly, deny []string }
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
`,
			want: rules{[]string{"docs__*"}, []string{"tickets__*"}, []string{"*__delete_*"}},
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
			got := rules{p.rules[keyAllow], p.rules[keyAllowReadOnly], p.rules[keyDeny]}
			for i, pair := range [][2][]string{{got.allow, tt.want.allow}, {got.allowReadOnly, tt.want.allowReadOnly}, {got.deny, tt.want.deny}} {
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
				`policies/reader.toml:2: unexpected table [allow]: a policy has only the keys allow, allow_read_only and deny`,
				`policies/reader.toml:3: unknown key "x"`,
			},
		},
		{
			name: "array of tables",
			data: "\n[[rules]]\n",
			want: []string{`policies/reader.toml:2: unexpected table [rules]: a policy has only the keys allow, allow_read_only and deny`},
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
	if p.Identity != "reader" || p.File != path || !p.Allows("docs__x", false) {
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
allow = ["docs__*", "wiki__page_get"]
allow_read_only = ["tickets__*"]
deny = ["*__delete_*", "docs__admin"]
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		readOnly bool
		want     bool
	}{
		{"docs__search", false, true},
		{"docs__search", true, true},
		{"wiki__page_get", false, true},
		{"wiki__page_get_all", false, false},
		{"tickets__list", true, true},
		{"tickets__list", false, false}, // read-only grant, but the tool writes
		{"tickets__create", false, false},
		{"docs__delete_page", false, false},  // deny wins over allow
		{"tickets__delete_all", true, false}, // deny wins over allow_read_only
		{"docs__admin", true, false},
		{"other__search", true, false},
		{"", true, false},
		{"docs__", false, true},
	}
	for _, tt := range tests {
		if got := p.Allows(tt.name, tt.readOnly); got != tt.want {
			t.Errorf("Allows(%q, readOnly=%v) = %v; want %v", tt.name, tt.readOnly, got, tt.want)
		}
	}

	var nilPolicy *Policy
	if nilPolicy.Allows("docs__search", true) {
		t.Error("nil policy allows")
	}
	empty, err := Parse(testFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if empty.Allows("docs__search", true) {
		t.Error("empty policy allows")
	}
}

func TestAllowsDoesNotAllocate(t *testing.T) {
	p, err := Parse(testFile, []byte(`
allow = ["docs__*", "wiki__page_?et"]
allow_read_only = ["*tickets*__*"]
deny = ["*__delete_*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{
		"docs__search",
		"wiki__page_get",
		"tickets__list",
		"ünïcödé__tööl",
	}
	for _, name := range names {
		if n := testing.AllocsPerRun(100, func() { p.Allows(name, true) }); n != 0 {
			t.Errorf("Allows(%q) allocates %v times per call", name, n)
		}
	}

	// Long names too: real tool names often pass 32 characters.
	long := "github__create_pull_request_review_comment"
	if n := testing.AllocsPerRun(100, func() { p.Allows(long, true) }); n != 0 {
		t.Errorf("Allows(%q) allocates %v times per call", long, n)
	}
}

func BenchmarkAllows(b *testing.B) {
	p, err := Parse(testFile, []byte(`
allow = ["docs__*", "wiki__*"]
allow_read_only = ["tickets__*"]
deny = ["*__delete_*"]
`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Allows("tickets__list_open", true)
	}
}

func TestErrorWithoutLine(t *testing.T) {
	e := &Error{File: testFile, Msg: "something"}
	if got, want := e.Error(), testFile+": something"; got != want {
		t.Errorf("Error() = %q; want %q", got, want)
	}
}

func TestPolicyString(t *testing.T) {
	p := mustParse(t, "reader", "deny = [\"b\"]\nallow = [\"x\", \"a\"]\n")
	if got, want := p.String(), `allow = ["a", "x"]; deny = ["b"]`; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
	var nilPolicy *Policy
	if got := nilPolicy.String(); got != "<no policy>" {
		t.Errorf("nil String() = %s", got)
	}
}
