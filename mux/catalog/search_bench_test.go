package catalog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/policy"
)

// The speed of find_tools at 10,000 tools: the real tools of the search
// corpus (mux/toolsearch/testdata) in children copied until there are
// 10,000, searched as a caller whose policy allows everything. Run with
//
//	go test -run '^$' -bench Search10k -benchmem ./mux/catalog

const benchTools = 10000 // 27 children of 380: 10,260

// corpusCatalog builds the merged catalog of the corpus copied to n tools,
// and returns it with the corpus's queries.
func corpusCatalog(b *testing.B, n int) (*Catalog, []*ChildCatalog, []string) {
	b.Helper()
	dir := filepath.Join("..", "toolsearch", "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no corpus: %v", err)
	}
	// One child lists every tool of the corpus, each named
	// <server>_<tool> (so that two servers' tools do not collide), and
	// the child is copied under new aliases until there are n tools: 27
	// children of 380 tools for 10,000.
	var all [NumKinds][]json.RawMessage
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var c struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			b.Fatal(err)
		}
		server := strings.TrimSuffix(filepath.Base(f), ".json")
		for _, t := range c.Tools {
			var name string
			_ = json.Unmarshal(t["name"], &name)
			t["name"], _ = json.Marshal(strings.ReplaceAll(server, "-", "_") + "_" + name)
			def, err := json.Marshal(t)
			if err != nil {
				b.Fatal(err)
			}
			all[KindTool] = append(all[KindTool], def)
		}
	}
	var src strings.Builder
	src.WriteString("[mux]\nmax_name_length = 128\n[limits]\nmax_catalog_bytes = \"256MiB\"\n")
	copies := (n + len(all[KindTool]) - 1) / len(all[KindTool])
	for i := range copies {
		fmt.Fprintf(&src, "[servers.c%02d]\ncommand = \"x\"\n", i)
	}
	cfg, err := config.Parse("mcpmux.toml", []byte(src.String()), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	var parts []Part
	var children []*ChildCatalog
	for _, srv := range cfg.Servers {
		cc := NewBuilder(cfg, srv, false, zerolog.Nop()).Build(all, mcp.ServerCapabilities{})
		children = append(children, cc)
		parts = append(parts, Part{Alias: srv.Alias, Listed: cc, Log: zerolog.Nop()})
	}
	data, err := os.ReadFile(filepath.Join(dir, "queries.json"))
	if err != nil {
		b.Fatal(err)
	}
	var qs []struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(data, &qs); err != nil {
		b.Fatal(err)
	}
	var queries []string
	for _, q := range qs {
		queries = append(queries, q.Query)
	}
	return Merge(parts), children, queries
}

func allowAll(b *testing.B) Viewer {
	p, err := policy.Parse("policies/bench.toml", []byte(`allow = ["*"]`))
	if err != nil {
		b.Fatal(err)
	}
	return Viewer{Policy: p}
}

// BenchmarkSearch10k is one find_tools of 10 over the catalog, its index
// built: the p50 of its queries, each timed alone, besides the mean.
func BenchmarkSearch10k(b *testing.B) {
	cat, _, queries := corpusCatalog(b, benchTools)
	v := allowAll(b)
	cat.Search("warm up", 10, "", v) // builds every child's index
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		cat.Search(queries[i%len(queries)], 10, "", v)
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(cat.Kinds[KindTool].List)), "tools")
}

// BenchmarkSearchIndex10k is what a catalog change costs find_tools: one
// child's index built anew (the changed child's; the others are kept), and,
// as index-all-ms, every child's at once, with the heap all the indexes
// hold.
func BenchmarkSearchIndex10k(b *testing.B) {
	cat, children, _ := corpusCatalog(b, benchTools)
	_ = cat
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for _, cc := range children {
		cc.SearchIndex()
	}
	all := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The largest child is the worst case of one change.
	big := slices.MaxFunc(children, func(a, c *ChildCatalog) int { return len(a.Tools()) - len(c.Tools()) })
	b.ResetTimer()
	for range b.N {
		big.search = searchIndex{}
		big.SearchIndex()
	}
	b.StopTimer()
	b.ReportMetric(float64(len(big.Tools())), "child-tools")
	b.ReportMetric(float64(all.Microseconds())/1000, "index-all-ms")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "index-MiB")
}
