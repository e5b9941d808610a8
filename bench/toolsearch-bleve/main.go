// Command toolsearch-bleve compares bleve v2 with mcpmux's own index
// (mux/toolsearch) at ranking tools for a query: the search quality on the
// corpus of mux/toolsearch/testdata, and the speed, build time and memory at
// 10,000 tools. Run it from this directory:
//
//	go run .
//
// It is a module of its own so that bleve stays out of mcpmux's go.mod.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	bleveindex "github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"

	"github.com/mcpmux/mcpmux/mux/toolsearch"
)

var testdata = flag.String("testdata", filepath.Join("..", "..", "mux", "toolsearch", "testdata"), "the corpus and its queries")

// child is one child server's tools, as the index reads them, with the key
// of each ("<server>/<tool>").
type child struct {
	alias string
	docs  []toolsearch.Doc
	keys  []string
	defs  [][]byte // the definitions, for timing a build from them
	origs []string
}

type queryCase struct {
	Query   string   `json:"query"`
	Answers []string `json:"answers"`
}

func main() {
	flag.Parse()
	corpus, err := loadCorpus(*testdata)
	check(err)
	queries, err := loadQueries(*testdata)
	check(err)
	big := copies(corpus, 10000)

	engines := []engine{ownEngine{}, bleveEngine{scorch: true}, bleveEngine{scorch: true, one: true},
		bleveEngine{scorch: true, one: true, syn: true}, bleveEngine{}}
	var rows []row
	for _, e := range engines {
		r := row{name: e.name()}
		r.quality = measureQuality(e, corpus, queries)
		r.speed = measureSpeed(e, big, queries)
		rows = append(rows, r)
	}
	printTable(rows, corpus, big, queries)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func loadCorpus(dir string) ([]child, error) {
	files, err := filepath.Glob(filepath.Join(dir, "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no corpus in %s: %v", dir, err)
	}
	var out []child
	for _, f := range files {
		server := strings.TrimSuffix(filepath.Base(f), ".json")
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		ch := child{alias: server}
		for _, raw := range c.Tools {
			var t struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
			ch.add(server, t.Name, raw)
		}
		out = append(out, ch)
	}
	return out, nil
}

// add is a tool of ch named orig by the child, exposed as alias__orig as
// mcpmux does.
func (ch *child) add(alias, orig string, def []byte) {
	ch.docs = append(ch.docs, toolsearch.DocOf(alias+"__"+orig, orig, alias, def))
	ch.keys = append(ch.keys, alias+"/"+orig)
	ch.defs = append(ch.defs, def)
	ch.origs = append(ch.origs, orig)
}

func loadQueries(dir string) ([]queryCase, error) {
	b, err := os.ReadFile(filepath.Join(dir, "queries.json"))
	if err != nil {
		return nil, err
	}
	var qs []queryCase
	return qs, json.Unmarshal(b, &qs)
}

// copies is the corpus as mcpmux's own speed benchmark has it
// (mux/catalog/search_bench_test.go): one child listing every tool of the
// corpus, each renamed <server>_<tool>, copied under aliases c00, c01, ...
// until there are n tools: 27 children of 380 for 10,000.
func copies(corpus []child, n int) []child {
	type tool struct {
		name string
		def  []byte
	}
	var all []tool
	for _, ch := range corpus {
		for i, def := range ch.defs {
			var t map[string]json.RawMessage
			check(json.Unmarshal(def, &t))
			name := strings.ReplaceAll(ch.alias, "-", "_") + "_" + ch.origs[i]
			t["name"], _ = json.Marshal(name)
			b, err := json.Marshal(t)
			check(err)
			all = append(all, tool{name, b})
		}
	}
	var out []child
	for i := range (n + len(all) - 1) / len(all) {
		ch := child{alias: fmt.Sprintf("c%02d", i)}
		for _, t := range all {
			ch.add(ch.alias, t.name, t.def)
		}
		out = append(out, ch)
	}
	return out
}

// An engine indexes children and ranks their tools.
type engine interface {
	name() string
	// build indexes the children from their tools' definitions.
	build(children []child) any
	// update is what a change of child i's tools costs (its tools
	// indexed anew); it leaves built as it was for searching.
	update(built any, children []child, i int)
	// searcher is what ranks over what build made.
	searcher(built any, children []child) func(q string, limit int) []string
	close(built any)
}

// ownEngine is mux/toolsearch as mcpmux uses it (mux/catalog/search.go).
type ownEngine struct{}

func (ownEngine) name() string { return "mux/toolsearch" }

func (e ownEngine) build(children []child) any {
	var ixs []*toolsearch.Index
	for _, ch := range children {
		ixs = append(ixs, e.buildChild(ch))
	}
	return ixs
}

func (e ownEngine) update(_ any, children []child, i int) { e.buildChild(children[i]) }

func (ownEngine) buildChild(ch child) *toolsearch.Index {
	docs := make([]toolsearch.Doc, len(ch.defs))
	for i, def := range ch.defs {
		docs[i] = toolsearch.DocOf(ch.alias+"__"+ch.origs[i], ch.origs[i], ch.alias, def)
	}
	return toolsearch.New(docs)
}

func (ownEngine) searcher(built any, children []child) func(string, int) []string {
	ixs := built.([]*toolsearch.Index)
	all := func(int, int) bool { return true }
	return func(q string, limit int) []string {
		var keys []string
		for _, h := range toolsearch.Search(q, limit, ixs, all) {
			keys = append(keys, children[h.Index].keys[h.Doc])
		}
		return keys
	}
}

func (ownEngine) close(any) {}

// bleveEngine is bleve v2: one in-memory index per child, searched together
// through an IndexAlias. With scorch it is bleve's default index type
// (scorch, unpersisted when its path is "") scoring BM25 with the
// statistics of all the children (GlobalScoring); without, it is
// bleve.NewMemOnly (upsidedown over the gtreap store), which scores tf-idf:
// bleve's BM25 needs scorch's field statistics. With one, it is a single
// scorch index of every child's tools, a child's change a batch that
// indexes its tools anew under the same IDs (bleve's update in place).
// With syn, the index also holds mux/toolsearch's synonym table
// (mux/toolsearch/terms.go) as a bleve synonym collection, which every
// text field's match query expands by.
type bleveEngine struct{ scorch, one, syn bool }

func (e bleveEngine) name() string {
	switch {
	case e.syn:
		return "bleve scorch, 1 idx, syn"
	case e.one:
		return "bleve scorch, 1 index"
	case e.scorch:
		return "bleve scorch, alias"
	}
	return "bleve NewMemOnly, alias"
}

// The fields of a tool in bleve, and how much each counts (as query
// boosts): the same weights as mux/toolsearch's.
var fields = []struct {
	name  string
	boost float64
}{
	{"name", 3}, {"title", 2}, {"server", 1.5}, {"params", 1}, {"description", 1}, {"paramdesc", 0.5},
}

// bleveDoc is a tool as bleve indexes it. Name is the exposed and own
// names split into words (bleve's tokenizer keeps get_file_info one word);
// Names is both whole and lowercased, for the same exact-name and
// name-prefix preference mux/toolsearch has.
type bleveDoc struct {
	Name        string   `json:"name"`
	Title       string   `json:"title"`
	Server      string   `json:"server"`
	Params      []string `json:"params"`
	Description string   `json:"description"`
	ParamDesc   []string `json:"paramdesc"`
	Names       []string `json:"names"`
}

const maxDescribed = 4096 // as mux/toolsearch reads of a description

func bleveDocOf(d toolsearch.Doc) bleveDoc {
	b := bleveDoc{
		Name:        words(d.Name),
		Title:       d.Title,
		Server:      words(d.Server),
		Description: truncate(d.Description),
		Names:       []string{strings.ToLower(d.Name)},
	}
	if d.Orig != d.Name {
		b.Name += " " + words(d.Orig)
		b.Names = append(b.Names, strings.ToLower(d.Orig))
	}
	for _, p := range d.Params {
		b.Params = append(b.Params, words(p.Name))
		b.ParamDesc = append(b.ParamDesc, truncate(p.Description))
	}
	return b
}

func truncate(s string) string { return s[:min(len(s), maxDescribed)] }

// words splits an identifier into words: at anything not a letter or
// digit and inside camelCase ("getFileInfo", "get_file_info": get file
// info).
func words(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) ||
				unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte(' ')
			}
			b.WriteRune(r)
		default:
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func (e bleveEngine) mapping() mapping.IndexMapping {
	m := bleve.NewIndexMapping()
	m.DefaultAnalyzer = en.AnalyzerName
	if e.scorch {
		m.ScoringModel = index.BM25Scoring
	}
	dm := bleve.NewDocumentStaticMapping()
	for _, f := range fields {
		fm := bleve.NewTextFieldMapping()
		fm.Analyzer = en.AnalyzerName
		// Only searched: nothing stored, highlighted or sorted on.
		fm.Store, fm.IncludeTermVectors, fm.IncludeInAll, fm.DocValues = false, false, false, false
		if e.syn {
			fm.SynonymSource = "synonyms"
		}
		dm.AddFieldMappingsAt(f.name, fm)
	}
	if e.syn {
		check(m.AddSynonymSource("synonyms", map[string]any{"collection": "synonyms", "analyzer": en.AnalyzerName}))
	}
	km := bleve.NewKeywordFieldMapping()
	km.Analyzer = keyword.Name
	km.Store, km.IncludeTermVectors, km.IncludeInAll, km.DocValues = false, false, false, false
	dm.AddFieldMappingsAt("names", km)
	m.DefaultMapping = dm
	m.StoreDynamic, m.IndexDynamic, m.DocValuesDynamic = false, false, false
	return m
}

func (e bleveEngine) build(children []child) any {
	if e.one {
		return []bleve.Index{e.buildIndex("all", children...)}
	}
	var ixs []bleve.Index
	for _, ch := range children {
		ixs = append(ixs, e.buildIndex(ch.alias, ch))
	}
	return ixs
}

func (e bleveEngine) update(built any, children []child, i int) {
	if !e.one {
		_ = e.buildIndex(children[i].alias, children[i]).Close()
		return
	}
	ix := built.([]bleve.Index)[0]
	batch := ix.NewBatch()
	e.addTo(batch, children[i])
	check(ix.Batch(batch))
}

func (e bleveEngine) buildIndex(name string, children ...child) bleve.Index {
	var ix bleve.Index
	var err error
	m := e.mapping()
	if e.scorch {
		ix, err = bleve.NewUsing("", m, bleveindex.Name, bleveindex.Name, nil)
	} else {
		ix, err = bleve.NewMemOnly(m)
	}
	check(err)
	ix.SetName(name)
	batch := ix.NewBatch()
	if e.syn {
		for i, g := range toolsearch.SynonymGroups() {
			check(batch.IndexSynonym(fmt.Sprintf("syn%d", i), "synonyms", &bleve.SynonymDefinition{Synonyms: g}))
		}
	}
	for _, ch := range children {
		e.addTo(batch, ch)
	}
	check(ix.Batch(batch))
	return ix
}

func (bleveEngine) addTo(batch *bleve.Batch, ch child) {
	for i, def := range ch.defs {
		d := toolsearch.DocOf(ch.alias+"__"+ch.origs[i], ch.origs[i], ch.alias, def)
		check(batch.Index(ch.keys[i], bleveDocOf(d)))
	}
}

// The exact-name and name-prefix boosts, far above any word's score as
// mux/toolsearch's bonuses are.
const (
	boostExactName  = 1e4
	boostNamePrefix = 1e2
)

func (e bleveEngine) searcher(built any, children []child) func(string, int) []string {
	alias := bleve.NewIndexAlias(built.([]bleve.Index)...)
	check(alias.SetIndexMapping(e.mapping()))
	ctx := context.WithValue(context.Background(), search.SearchTypeKey, search.GlobalScoring)
	return func(q string, limit int) []string {
		q = strings.TrimSpace(q)
		var qs []query.Query
		for _, f := range fields {
			mq := bleve.NewMatchQuery(q)
			mq.SetField(f.name)
			mq.SetBoost(f.boost)
			qs = append(qs, mq)
		}
		lq := strings.ToLower(q)
		tq := bleve.NewTermQuery(lq)
		tq.SetField("names")
		tq.SetBoost(boostExactName)
		pq := bleve.NewPrefixQuery(lq)
		pq.SetField("names")
		pq.SetBoost(boostNamePrefix)
		qs = append(qs, tq, pq)
		req := bleve.NewSearchRequestOptions(bleve.NewDisjunctionQuery(qs...), limit, 0, false)
		res, err := alias.SearchInContext(ctx, req)
		check(err)
		keys := make([]string, len(res.Hits))
		for i, h := range res.Hits {
			keys[i] = h.ID
		}
		return keys
	}
}

func (bleveEngine) close(built any) {
	for _, ix := range built.([]bleve.Index) {
		_ = ix.Close()
	}
}

type quality struct{ success5, recall5, mrr float64 }

// measureQuality ranks every query over the corpus, each server one index,
// as mux/toolsearch's BenchmarkSearchQuality does.
func measureQuality(e engine, corpus []child, queries []queryCase) quality {
	built := e.build(corpus)
	defer e.close(built)
	find := e.searcher(built, corpus)
	var q quality
	var answers, found5 int
	for _, c := range queries {
		got := find(c.Query, 20)
		first := slices.IndexFunc(got, func(k string) bool { return slices.Contains(c.Answers, k) })
		if first >= 0 {
			q.mrr += 1 / float64(first+1)
		}
		if first >= 0 && first < 5 {
			q.success5++
		}
		answers += len(c.Answers)
		for _, a := range c.Answers {
			if i := slices.Index(got, a); i >= 0 && i < 5 {
				found5++
			}
		}
	}
	n := float64(len(queries))
	return quality{q.success5 / n, float64(found5) / float64(answers), q.mrr / n}
}

type speed struct {
	p50, p99, child, all time.Duration
	heap                 uint64
	tools, childTools    int
}

const (
	findLimit   = 10 // find_tools' default
	rounds      = 5  // each query timed this many times
	childBuilds = 10 // the median of this many builds of one child
)

func measureSpeed(e engine, children []child, queries []queryCase) speed {
	var s speed
	for _, ch := range children {
		s.tools += len(ch.defs)
	}
	s.childTools = len(children[0].defs)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	built := e.build(children)
	s.all = time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	s.heap = after.HeapAlloc - before.HeapAlloc

	find := e.searcher(built, children)
	for _, c := range queries { // warm up
		find(c.Query, findLimit)
	}
	var took []time.Duration
	for range rounds {
		for _, c := range queries {
			start := time.Now()
			find(c.Query, findLimit)
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	s.p50, s.p99 = took[len(took)/2], took[len(took)*99/100]

	// One child changed: its tools indexed anew, the others kept.
	var builds []time.Duration
	for range childBuilds {
		start := time.Now()
		e.update(built, children, 0)
		builds = append(builds, time.Since(start))
	}
	slices.Sort(builds)
	s.child = builds[len(builds)/2]
	e.close(built)
	return s
}

type row struct {
	name string
	quality
	speed
}

func printTable(rows []row, corpus []child, big []child, queries []queryCase) {
	n := 0
	for _, ch := range corpus {
		n += len(ch.docs)
	}
	fmt.Printf("quality: %d queries over %d tools of %d servers, one index per server (bleve alias rows: an IndexAlias over them, global BM25 statistics; 1 index: all in one)\n", len(queries), n, len(corpus))
	fmt.Printf("speed: %d tools, %d children of %d; find of %d, each query timed alone, %d rounds after warm-up; %s, GOMAXPROCS %d\n\n",
		rows[0].tools, len(big), rows[0].childTools, findLimit, rounds, runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Printf("%-26s %9s %8s %6s %9s %9s %10s %10s %10s\n",
		"engine", "success@5", "recall@5", "MRR", "p50", "p99", "child idx", "all idx", "heap")
	for _, r := range rows {
		fmt.Printf("%-26s %9.3f %8.3f %6.3f %9s %9s %10s %10s %7.1f MiB\n",
			r.name, r.success5, r.recall5, r.mrr, dur(r.p50), dur(r.p99), dur(r.child), dur(r.all), float64(r.heap)/(1<<20))
	}
}

func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
}
