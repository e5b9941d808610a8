package mux

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/policy"
)

// mergeLab is a Mux whose children are never started: each child's catalog
// is built from lists given by the test and published as its run loop
// would, so that merging, naming and routing can be checked exactly.
type mergeLab struct {
	m   *Mux
	log *testsupport.SyncBuffer
}

func newMergeLab(t *testing.T, servers string) *mergeLab {
	t.Helper()
	dir := t.TempDir()
	src := "[mux]\npolicy_dir = \".\"\n\n" + servers
	cfg, err := config.Parse(filepath.Join(dir, "mcpmux.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	log := &testsupport.SyncBuffer{}
	return &mergeLab{m: New(cfg, store, Options{Log: zerolog.New(log)}), log: log}
}

// offer publishes what the child of alias lists, one JSON array per kind
// ("" for none), as a ready child would.
func (l *mergeLab) offer(t *testing.T, alias string, lists [catalog.NumKinds]string) {
	t.Helper()
	c := l.m.childOf(alias)
	var raw [catalog.NumKinds][]json.RawMessage
	caps := mcp.ServerCapabilities{}
	for k, list := range lists {
		if list == "" {
			continue
		}
		if err := json.Unmarshal([]byte(list), &raw[k]); err != nil {
			t.Fatal(err)
		}
	}
	if lists[catalog.KindResource] != "" || lists[catalog.KindTemplate] != "" {
		caps.Resources = &struct {
			Subscribe   bool `json:"subscribe,omitempty"`
			ListChanged bool `json:"listChanged,omitempty"`
		}{}
	}
	c.PublishListed(c.Builder().Build(raw, caps))
}

func (l *mergeLab) names(k catalog.Kind) []string {
	var out []string
	for _, e := range l.m.catalog.Load().Kinds[k].List {
		out = append(out, e.Name)
	}
	return out
}

// With prefix = false, a child's names and URIs are exposed as it wrote
// them, except where a server listed earlier already exposes the same
// one: that server keeps it, the later one falls back to its prefixed form,
// and the log says so.
func TestMergeUnprefixed(t *testing.T) {
	l := newMergeLab(t, `
[servers.main]
command = "never-started"
prefix = false

[servers.docs]
command = "never-started"

[servers.side]
command = "never-started"
prefix = false
`)
	tool := func(names ...string) string {
		var b []string
		for _, n := range names {
			b = append(b, `{"name":"`+n+`","inputSchema":{"type":"object"}}`)
		}
		return "[" + strings.Join(b, ",") + "]"
	}
	l.offer(t, "main", [catalog.NumKinds]string{
		catalog.KindTool:     tool("search", "docs__open"),
		catalog.KindPrompt:   `[{"name":"greet"}]`,
		catalog.KindResource: `[{"uri":"file:///shared","name":"s"},{"uri":"file:///main-only","name":"m"}]`,
		catalog.KindTemplate: `[{"uriTemplate":"db://{table}","name":"t"}]`,
	})
	l.offer(t, "docs", [catalog.NumKinds]string{
		catalog.KindTool:     tool("search", "open"),
		catalog.KindResource: `[{"uri":"file:///shared","name":"s"}]`,
	})
	l.offer(t, "side", [catalog.NumKinds]string{
		catalog.KindTool:     tool("search", "only-side"),
		catalog.KindPrompt:   `[{"name":"greet"},{"name":"bye"}]`,
		catalog.KindResource: `[{"uri":"file:///shared","name":"s"}]`,
		catalog.KindTemplate: `[{"uriTemplate":"kv://{key}","name":"kv"}]`,
	})
	for _, c := range []struct {
		k    catalog.Kind
		want string
	}{
		// main's "docs__open" is bare and listed first, so docs's own
		// docs__open has no form left and is left out.
		{catalog.KindTool, "search docs__open docs__search side__search only-side"},
		{catalog.KindPrompt, "greet side__greet bye"},
		{catalog.KindResource, "file:///shared file:///main-only mcpmux://docs/file:///shared mcpmux://side/file:///shared"},
		{catalog.KindTemplate, "db://{table} kv://{key}"},
	} {
		if got := strings.Join(l.names(c.k), " "); got != c.want {
			t.Errorf("%s: exposed %q, want %q", catalog.KindWire[c.k].Label, got, c.want)
		}
	}
	for _, want := range []string{
		`"server":"side","kind":"tool","exposed":"side__search","bare_kept_by":"main"`,
		`"server":"docs","kind":"tool","exposed":"docs__open","kept_by":"main"`,
	} {
		if !strings.Contains(l.log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, l.log.String())
		}
	}
	// Every exposed definition carries its exposed name.
	cat := l.m.catalog.Load()
	for k := range catalog.NumKinds {
		for _, e := range cat.Kinds[k].List {
			var def map[string]any
			if err := json.Unmarshal(e.Def, &def); err != nil || def[catalog.KindWire[k].Key] != e.Name {
				t.Errorf("%s %s: definition %s", catalog.KindWire[k].Label, e.Name, e.Def)
			}
		}
	}

	// Reads route back to the owner with the child's own URI.
	for _, c := range []struct{ uri, alias, orig string }{
		{"file:///shared", "main", "file:///shared"},
		{"mcpmux://side/file:///shared", "side", "file:///shared"},
		{"mcpmux://docs/file:///shared", "docs", "file:///shared"},
		{"mcpmux://docs/file:///never-listed", "docs", "file:///never-listed"},
		{"db://users", "main", "db://users"},
		{"kv://k1", "side", "kv://k1"},
		{"unknown://x", "", ""}, // two unprefixed children offer resources: no guess
		{"mcpmux://nobody/x", "", ""},
	} {
		ch, orig, ok := l.m.p.RouteURI(cat, c.uri)
		got := ""
		if ok {
			got = ch.Alias()
		}
		if got != c.alias || orig != c.orig {
			t.Errorf("RouteURI(%q) = %q %q %t, want %q %q", c.uri, got, orig, ok, c.alias, c.orig)
		}
	}
}

// A tool definition goes upstream as the child wrote it, but for its name:
// unknown keys and annotations kept, nothing added.
func TestDefinitionsVerbatim(t *testing.T) {
	l := newMergeLab(t, "[servers.fs]\ncommand = \"never-started\"\n")
	def := `{"name":"read", "inputSchema":{"type":"object","properties":{"p":{"type":"string"}}},` +
		`"annotations":{"readOnlyHint":true,"x-vendor":{"n":12345678901234567890}},"x-extra":[1,2.50,"z"]}`
	bare := `{"name":"bare","inputSchema":{"type":"object"}}`
	noType := `{"name":"untyped","inputSchema":{"properties":{}}}`
	l.offer(t, "fs", [catalog.NumKinds]string{catalog.KindTool: "[" + def + "," + bare + "," + noType + "]"})
	cat := l.m.catalog.Load()
	for _, c := range []struct{ name, want string }{
		{"fs__read", strings.Replace(def, `"read"`, `"fs__read"`, 1)},
		{"fs__bare", `{"name":"fs__bare","inputSchema":{"type":"object"}}`},
		// MCP requires the type; it is the only thing added.
		{"fs__untyped", `{"name":"fs__untyped","inputSchema":{"type":"object","properties":{}}}`},
	} {
		e, ok := cat.Lookup(catalog.KindTool, c.name)
		if !ok {
			t.Fatalf("%s not exposed", c.name)
		}
		if !bytes.Equal(e.Def, []byte(c.want)) {
			t.Errorf("%s: definition\n%s\nwant\n%s", c.name, e.Def, c.want)
		}
	}
	if e, _ := cat.Lookup(catalog.KindTool, "fs__read"); !e.ReadOnly {
		t.Error("readOnlyHint of a trusted child was not read")
	}
}

// childOf returns m's child of alias, or nil.
func (m *Mux) childOf(alias string) *child.Server {
	for _, c := range m.list() {
		if c.Alias() == alias {
			return c
		}
	}
	return nil
}
