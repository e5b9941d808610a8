package child

import (
	"bytes"
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/catalog"
)

// unstartedChild returns the child of a config with one stdio server "fs",
// never started: for the parts of mcpmux that work on what a child sent.
func unstartedChild(tb testing.TB, serverLines string) (*Server, *config.Config) {
	tb.Helper()
	dir := tb.TempDir()
	src := "[mux]\npolicy_dir = \".\"\nmax_name_length = 24\n\n[servers.fs]\ncommand = \"never-started\"\n" + serverLines + "\n"
	cfg, err := config.Parse(filepath.Join(dir, "mcpmux.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	return New(newTestHost(tb), Env{Config: cfg, Log: zerolog.Nop()}, cfg.Servers[0]), cfg
}

var validExposed = regexp.MustCompile(`^fs__[A-Za-z0-9_-]+$`)

// FuzzCatalog builds a child's catalog from a fuzzed tools/list page, as
// readCatalog does, and checks what would be exposed: every tool has a
// valid, unique name within max_name_length, an inputSchema that is an
// object schema and compiled, an outputSchema that is one or none, and a
// definition that encodes; the names do not depend on the child's order.
func FuzzCatalog(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"read","inputSchema":{"type":"object"}},{"name":"write.file"},{"name":"write_file"}]}`))
	c, cfg := unstartedChild(f, "hide = [\"secret*\"]\nread_only = [\"read*\"]\ntrust_annotations = false")
	f.Fuzz(func(t *testing.T, page []byte) {
		if len(page) > 4<<20 {
			return // the catalog size limit has its own tests
		}
		p, err := decodePage(page, "tools")
		if err != nil {
			return // readCatalog refuses the page
		}
		build := func(tools []json.RawMessage) *catalog.ChildCatalog {
			var raw [catalog.NumKinds][]json.RawMessage
			raw[catalog.KindTool] = tools
			return c.build.Load().Build(raw, mcp.ServerCapabilities{})
		}
		cat := build(p.Items)
		names := map[string]string{} // orig -> exposed
		taken := map[string]bool{}
		for _, tl := range cat.Tools() {
			if !validExposed.MatchString(tl.Name) || len(tl.Name) > cfg.Mux.MaxNameLength {
				t.Fatalf("tool %q is exposed as %q", tl.Orig, tl.Name)
			}
			if taken[tl.Name] || names[tl.Orig] != "" {
				t.Fatalf("tool %q: the name %q or the tool is exposed twice", tl.Orig, tl.Name)
			}
			taken[tl.Name], names[tl.Orig] = true, tl.Name
			var def struct {
				Name         string          `json:"name"`
				InputSchema  json.RawMessage `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			}
			if err := json.Unmarshal(tl.Def, &def); err != nil || def.Name != tl.Name || tl.Args == nil || tl.Server != c.alias {
				t.Fatalf("tool %q is not set up: %+v (%v)", tl.Orig, tl, err)
			}
			checkObjectSchema(t, tl.Orig, "inputSchema", def.InputSchema)
			if def.OutputSchema != nil {
				checkObjectSchema(t, tl.Orig, "outputSchema", def.OutputSchema)
			}
			if tl.ReadOnly != (len(tl.Orig) >= 4 && tl.Orig[:4] == "read") {
				t.Fatalf("tool %q: readOnly is %v", tl.Orig, tl.ReadOnly)
			}
			if !json.Valid(tl.Def) {
				t.Fatalf("tool %q: its definition is not valid JSON: %s", tl.Orig, tl.Def)
			}
			// Checking arguments never panics, whatever the schema.
			args, _, levels, err := args.Object(json.RawMessage(`{"a":[1,"x",{"b":null}]}`))
			if err != nil {
				t.Fatal(err)
			}
			_ = tl.Args.Check(args, levels)
		}
		reversed := slices.Clone(p.Items)
		slices.Reverse(reversed)
		again := map[string]string{}
		for _, tl := range build(reversed).Tools() {
			again[tl.Orig] = tl.Name
		}
		// With a name listed twice, the other definition is kept, and it may
		// be refused where the first was not.
		if hasDuplicateNames(p.Items) {
			return
		}
		if !maps.Equal(names, again) {
			t.Fatalf("the names depend on the child's order:\n%v\n%v", names, again)
		}
	})
}

func hasDuplicateNames(raw []json.RawMessage) bool {
	seen := map[string]bool{}
	for _, r := range raw {
		var w struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r, &w) != nil {
			continue
		}
		if seen[w.Name] {
			return true
		}
		seen[w.Name] = true
	}
	return false
}

// checkObjectSchema fails t unless raw is a JSON object whose "type" is
// "object", as strict clients require of every tool they list.
func checkObjectSchema(t *testing.T, tool, what string, raw json.RawMessage) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil || string(bytes.TrimSpace(top["type"])) != `"object"` {
		t.Fatalf("tool %q: %s %s is not an object schema (%v)", tool, what, raw, err)
	}
}
