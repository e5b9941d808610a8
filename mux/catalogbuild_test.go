package mux

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/catalog"
)

// A tool whose x-mcp-header annotations mcp-go refuses is left out however
// its definition spells the member (encoding/json matches it in any case
// and with escapes), and a definition with no such member is kept.
func TestHeaderAnnotationsAnySpelling(t *testing.T) {
	l := newMergeLab(t, "[servers.main]\ncommand = \"never-started\"\n")
	// An annotation on an object property is refused by mcp-go.
	bad := func(name, key string) string {
		return `{"name":"` + name + `","inputSchema":{"type":"object","properties":{"p":{"type":"object","` + key + `":"X-P"}}}}`
	}
	l.offer(t, "main", [catalog.NumKinds]string{catalog.KindTool: "[" + strings.Join([]string{
		bad("plain", "x-mcp-header"),
		bad("upper", "X-MCP-Header"),
		bad("escaped", `x\u002dmcp-header`),
		`{"name":"fine","description":"has x-mcp-headers in its text","inputSchema":{"type":"object","properties":{"p":{"type":"string","x-mcp-header":"X-P"}}}}`,
		`{"name":"none","inputSchema":{"type":"object","properties":{"p":{"type":"object"}}}}`,
	}, ",") + "]"})
	if got := strings.Join(l.names(catalog.KindTool), " "); got != "main__fine main__none" {
		t.Errorf("exposed %q, want main__fine main__none", got)
	}
	if n := strings.Count(l.log.String(), "invalid x-mcp-header annotations"); n != 3 {
		t.Errorf("%d tools logged as left out for their annotations, want 3\n%s", n, l.log.String())
	}
}

func TestMayAnnotateHeaders(t *testing.T) {
	for _, c := range []struct {
		def  string
		want bool
	}{
		{`{"name":"a","inputSchema":{"type":"object"}}`, false},
		{`{"name":"a-b","inputSchema":{"properties":{"x-mcp-heade":{}}}}`, false},
		{`{"x-mcp-header":1}`, true},
		{`{"X-Mcp-HEADER":1}`, true},
		{`{"x-mcp-header`, true},
		{`{"a":"\n"}`, true}, // any escape could spell the member
		{`x-mcp-heade`, false},
		{``, false},
	} {
		if got := catalog.MayAnnotateHeaders([]byte(c.def)); got != c.want {
			t.Errorf("mayAnnotateHeaders(%s) = %v, want %v", c.def, got, c.want)
		}
	}
}

// Vetting is remembered by a schema's exact bytes: tools listing the same
// schema share one copy of it, a re-read listing it again gets a new
// checker on the same bytes, and a tool whose schema changed under the same
// name is vetted again (and refused when it no longer passes).
func TestSchemaVettingRemembered(t *testing.T) {
	l := newMergeLab(t, "[servers.main]\ncommand = \"never-started\"\n\n[limits]\nmax_schema_depth = 3\n")
	shared := `{"type":"object","properties":{"q":{"type":"string"}}}`
	deep := `{"type":"object","properties":{"q":{"type":"object","properties":{"r":{"type":"object"}}}}}`
	list := func(schemaB string) string {
		return `[{"name":"a","inputSchema":` + shared + `},{"name":"b","inputSchema":` + schemaB + `}]`
	}
	checkers := func() map[string]*args.Checker {
		out := map[string]*args.Checker{}
		for _, e := range l.m.catalog.Load().Kinds[catalog.KindTool].List {
			out[e.Orig] = e.Args
		}
		return out
	}
	bytesOf := func(a *args.Checker) *byte { return unsafe.SliceData(a.Schema()) }

	l.offer(t, "main", [catalog.NumKinds]string{catalog.KindTool: list(shared)})
	first := checkers()
	if len(first) != 2 || bytesOf(first["a"]) != bytesOf(first["b"]) {
		t.Fatalf("tools a and b with one schema: checkers %v, want two sharing the schema's bytes", first)
	}
	l.offer(t, "main", [catalog.NumKinds]string{catalog.KindTool: list(shared)})
	second := checkers()
	if second["a"] == first["a"] || bytesOf(second["a"]) != bytesOf(first["a"]) {
		t.Errorf("re-read: checker %p on %p, want a new checker on the first read's bytes %p", second["a"], bytesOf(second["a"]), bytesOf(first["a"]))
	}
	l.offer(t, "main", [catalog.NumKinds]string{catalog.KindTool: list(deep)})
	if got := strings.Join(l.names(catalog.KindTool), " "); got != "main__a" {
		t.Errorf("b's schema now nests too deep: exposed %q, want main__a", got)
	}
	if !strings.Contains(l.log.String(), "its inputSchema is nested deeper than max_schema_depth") {
		t.Errorf("b's refusal not logged:\n%s", l.log.String())
	}
}

// A definition read again with the same bytes is not checked again, but
// what depends on more than its bytes is decided anew: a task-only tool is
// offered while the child declares tasks for tools/call and left out on a
// read where it does not; a fixed definition stays fixed; a tool whose
// outputSchema is dropped is warned about on every read.
func TestCheckedToolsRemembered(t *testing.T) {
	l := newMergeLab(t, "[servers.main]\ncommand = \"never-started\"\nread_only = [\"ro\"]\n")
	c := l.m.childOf("main")
	var raw [catalog.NumKinds][]json.RawMessage
	if err := json.Unmarshal([]byte(`[
		{"name":"task","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},
		{"name":"untyped","inputSchema":{"properties":{}}},
		{"name":"ro","inputSchema":{"type":"object"}},
		{"name":"badout","inputSchema":{"type":"object"},"outputSchema":{"type":"string"}}
	]`), &raw[catalog.KindTool]); err != nil {
		t.Fatal(err)
	}
	tasks := mcp.ServerCapabilities{Tasks: &mcp.TasksCapability{Requests: &mcp.TaskRequestsCapability{Tools: &struct {
		Call *struct{} `json:"call,omitempty"`
	}{Call: &struct{}{}}}}}
	describe := func(cat *catalog.ChildCatalog) string {
		var out []string
		for _, e := range cat.Tools() {
			out = append(out, fmt.Sprintf("%s task=%q ro=%t def=%s", e.Orig, e.Task, e.ReadOnly, e.Def))
		}
		return strings.Join(out, "\n")
	}
	first := describe(c.Builder().Build(raw, tasks))
	if c.Builder().Remembered() != 3 {
		t.Errorf("%d definitions remembered, want 3 (not badout's, whose outputSchema was dropped)", c.Builder().Remembered())
	}
	if again := describe(c.Builder().Build(raw, tasks)); again != first {
		t.Errorf("read again:\n%s\nwant, as the first time:\n%s", again, first)
	}
	for _, want := range []string{`task task="required"`, `"inputSchema":{"type":"object","properties":{}}`, "ro task=\"\" ro=true"} {
		if !strings.Contains(first, want) {
			t.Errorf("catalog lacks %q:\n%s", want, first)
		}
	}
	without := describe(c.Builder().Build(raw, mcp.ServerCapabilities{}))
	if strings.Contains(without, "task task=") || !strings.Contains(l.log.String(), catalog.TaskOnly) {
		t.Errorf("without tasks declared, the task-only tool is still offered or its refusal not logged:\n%s\n%s", without, l.log.String())
	}
	if n := strings.Count(l.log.String(), "outputSchema left out"); n != 3 {
		t.Errorf("outputSchema warning logged %d times over 3 reads, want 3", n)
	}
}
