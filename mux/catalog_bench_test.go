package mux

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/catalog"
)

// The catalog's benchmarks, with 100 and 10,000 tools in one child (the
// in-process lab child): building a child's catalog from its raw tools/list
// (parsing, schema checks, naming, renaming), rebuilding the merged catalog
// from the children's (what follows every child's new catalog; with nothing
// changed it stops before telling sessions), and encoding one identity's
// tools/list once per catalog generation. Run with
// go test -run '^$' -bench Catalog -benchmem ./mux.

var catalogSizes = []int{100, 10000}

// syntheticTool is shaped like bench/echochild's synthetic tools.
func syntheticTool(i int) mcp.Tool {
	name := fmt.Sprintf("tool_%05d", i)
	return mcp.NewTool(name,
		mcp.WithDescription("Synthetic benchmark tool "+name+": looks up records by query and returns a page of them."),
		mcp.WithString("query", mcp.Required(), mcp.Description("What to look for.")),
		mcp.WithNumber("limit", mcp.Description("Most records to return.")),
		mcp.WithBoolean("exact", mcp.Description("Match the query exactly.")),
	)
}

// catalogLab starts a Mux on a lab child offering n synthetic tools, which
// the identity "bench" may all see, and returns it with the child's raw
// tool definitions.
func catalogLab(b *testing.B, n int) (*Mux, []json.RawMessage) {
	b.Helper()
	tools := make([]server.ServerTool, n)
	raw := make([]json.RawMessage, n)
	for i := range tools {
		tools[i] = server.ServerTool{Tool: syntheticTool(i)}
		def, err := json.Marshal(tools[i].Tool)
		if err != nil {
			b.Fatal(err)
		}
		raw[i] = def
	}
	// Reading and checking 10,000 tools takes seconds under -race.
	m := startLab(b, labSpec{tools: tools, allow: []string{"bench"},
		limitLines: `max_catalog_bytes = "64MiB"`, serverLines: `startup_timeout = "2m"`})
	if got := len(m.catalog.Load().Kinds[catalog.KindTool].List); got != n {
		b.Fatalf("catalog holds %d tools, want %d", got, n)
	}
	return m, raw
}

func BenchmarkCatalogBuildChild(b *testing.B) { benchBuildChild(b, catalogLab) }

func BenchmarkCatalogRebuild(b *testing.B) { benchRebuild(b, catalogLab) }

// benchBuildChild times a child's catalog build over a mux that lab makes,
// at each of catalogSizes.
func benchBuildChild(b *testing.B, lab func(*testing.B, int) (*Mux, []json.RawMessage)) {
	for _, n := range catalogSizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			m, raw := lab(b, n)
			c := m.list()[0]
			var lists [catalog.NumKinds][]json.RawMessage
			lists[catalog.KindTool] = raw
			// first: nothing remembered from a catalog before (a first start);
			// reread: the same list read again (a re-read or a respawn).
			for _, first := range []bool{true, false} {
				b.Run(map[bool]string{true: "first", false: "reread"}[first], func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if first {
							c.Builder().Forget()
						}
						if cat := c.Builder().Build(lists, mcp.ServerCapabilities{}); len(cat.Tools()) != n {
							b.Fatalf("%d tools built, want %d", len(cat.Tools()), n)
						}
					}
				})
			}
		})
	}
}

// benchRebuild times the merged catalog's build over a mux that lab makes.
func benchRebuild(b *testing.B, lab func(*testing.B, int) (*Mux, []json.RawMessage)) {
	for _, n := range catalogSizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			m, _ := lab(b, n)
			b.ReportAllocs()
			for b.Loop() {
				m.pub.Rebuild()
			}
		})
	}
}

func BenchmarkCatalogEncodeList(b *testing.B) {
	for _, n := range catalogSizes {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) {
			m, _ := catalogLab(b, n)
			cat := m.catalog.Load()
			p := m.policies.Current().For("bench")
			b.ReportAllocs()
			for b.Loop() {
				cat.Encode(catalog.KindTool, catalog.Viewer{Policy: p})
			}
		})
	}
}
