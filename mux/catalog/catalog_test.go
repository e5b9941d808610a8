package catalog

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/policy"
)

// builders returns a builder for each server of the config src.
func builders(t testing.TB, src string) []*Builder {
	t.Helper()
	cfg, err := config.Parse("mcpmux.toml", []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var out []*Builder
	for _, s := range cfg.Servers {
		out = append(out, NewBuilder(cfg, s, false, zerolog.Nop()))
	}
	return out
}

// tools is a tools/list of tools by name.
func tools(names ...string) [NumKinds][]json.RawMessage {
	var raw [NumKinds][]json.RawMessage
	for _, n := range names {
		raw[KindTool] = append(raw[KindTool], json.RawMessage(`{"name":"`+n+`","inputSchema":{"type":"object"}}`))
	}
	return raw
}

func names(c *Catalog, k Kind, v Viewer) []string {
	var out []string
	for _, e := range c.Visible(k, v) {
		out = append(out, e.Name)
	}
	return out
}

// Merge in config order: a bare name two servers expose stays with the one
// listed first, the other's tool falls back to its prefixed name; hidden
// tools are kept apart; sealing tells what changed between snapshots.
func TestMergeInConfigOrder(t *testing.T) {
	b := builders(t, `
[servers.docs]
command = "docs"
prefix = false
hide = ["internal_*"]

[servers.tickets]
command = "tickets"
prefix = false
`)
	docs := b[0].Build(tools("search", "internal_reset"), mcp.ServerCapabilities{})
	tickets := b[1].Build(tools("search", "open"), mcp.ServerCapabilities{})
	merged := Merge([]Part{{Alias: "docs", Listed: docs, Log: zerolog.Nop()}, {Alias: "tickets", Listed: tickets, Log: zerolog.Nop()}})
	merged.Seal()

	p, err := policy.Parse("all.toml", []byte(`allow = ["*"]`))
	if err != nil {
		t.Fatal(err)
	}
	v := Viewer{Policy: p}
	if got, want := names(merged, KindTool, v), []string{"search", "tickets__search", "open"}; !slices.Equal(got, want) {
		t.Errorf("tools %q, want %q", got, want)
	}
	if e, ok := merged.Lookup(KindTool, "tickets__search"); !ok || e.Server != "tickets" || e.Orig != "search" {
		t.Errorf("tickets__search is %+v, %v", e, ok)
	}
	if _, ok := merged.Lookup(KindTool, "internal_reset"); ok {
		t.Error("a hidden tool is in the catalog")
	}
	if got := merged.Hidden["docs__internal_reset"]; got != "docs" {
		t.Errorf("hidden names %v", merged.Hidden)
	}
	if got := ChangedKinds(Empty, merged); !slices.Equal(got, []Kind{KindTool}) {
		t.Errorf("changed from empty: %v, want tools", got)
	}

	again := Merge([]Part{{Alias: "docs", Listed: b[0].Build(tools("search", "internal_reset"), mcp.ServerCapabilities{}), Log: zerolog.Nop()},
		{Alias: "tickets", Listed: tickets, Log: zerolog.Nop()}})
	again.Seal()
	if got := ChangedKinds(merged, again); len(got) != 0 {
		t.Errorf("the same lists built again changed %v", got)
	}
	if b[0].Remembered() != 1 {
		t.Errorf("docs' builder remembers %d definitions, want its one listed tool", b[0].Remembered())
	}
}

// A child's search index is built with its catalog exactly when the
// config's default mode may show tools through find_tools; otherwise it
// waits for the first search.
func TestSearchIndexBuiltWithTheCatalog(t *testing.T) {
	for _, mode := range []string{"full", "search", "auto"} {
		t.Run(mode, func(t *testing.T) {
			b := builders(t, "[mux]\ncatalog = \""+mode+"\"\n\n[servers.docs]\ncommand = \"docs\"\n")
			cc := b[0].Build(tools("search_docs", "fetch_page"), mcp.ServerCapabilities{})
			if got, want := cc.search.ix != nil, mode != "full"; got != want {
				t.Fatalf("index built with the catalog: %v, want %v", got, want)
			}
			if ix := cc.SearchIndex(); ix == nil || cc.search.ix != ix {
				t.Fatal("SearchIndex did not build or keep the index")
			}
		})
	}
}
