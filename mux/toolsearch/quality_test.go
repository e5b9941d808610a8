package toolsearch

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The search-quality benchmark: every query of testdata/queries.json
// ranked over the real tools of testdata/corpus, each server one index as
// in mcpmux, names exposed as alias__tool. A query is found at rank r when
// the first of its answers is the r-th tool returned.
//
//	go test -run '^$' -bench SearchQuality ./mux/toolsearch
//
// success@5 is the share of queries with an answer among the first 5,
// recall@5 the share of all answers among them (a query with several
// acceptable tools counts each), MRR the mean of 1/r (0 past 20). Each is
// printed for all queries and for the held-out half (heldOut).

// corpusIndexes indexes the corpus, one index per server in file order,
// and returns them with the "<server>/<tool>" key of each doc.
func corpusIndexes(tb testing.TB) ([]*Index, [][]string) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no corpus: %v", err)
	}
	var indexes []*Index
	var keys [][]string
	for _, f := range files {
		server := strings.TrimSuffix(filepath.Base(f), ".json")
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var c corpusFile
		if err := json.Unmarshal(b, &c); err != nil {
			tb.Fatal(err)
		}
		var docs []Doc
		var ks []string
		for _, raw := range c.Tools {
			var t corpusTool
			if err := json.Unmarshal(raw, &t); err != nil {
				tb.Fatal(err)
			}
			docs = append(docs, DocOf(server+"__"+t.Name, t.Name, server, raw))
			ks = append(ks, server+"/"+t.Name)
		}
		indexes = append(indexes, New(docs))
		keys = append(keys, ks)
	}
	return indexes, keys
}

func corpusQueries(tb testing.TB) []corpusQuery {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "queries.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var qs []corpusQuery
	if err := json.Unmarshal(b, &qs); err != nil {
		tb.Fatal(err)
	}
	return qs
}

// heldOut says whether a query is in the held-out half: a hash of its
// text, so that the split is fixed and independent of the ranking. The
// ranking's weights, stopwords and synonyms are tuned on the other half
// only; the held-out figures say how well that carries over.
func heldOut(query string) bool {
	h := fnv.New32a()
	h.Write([]byte(query))
	return h.Sum32()%2 == 1
}

// figures are the quality of the ranking over some of the queries.
type figures struct {
	queries, answers       int
	success5, recall5, mrr float64
}

// quality is the corpus's figures over all queries, the held-out half and
// the tuning half, and the queries not found in the first 5 with what came
// first instead.
type quality struct {
	all, held, tune figures
	misses          []string
}

func measure(tb testing.TB) quality {
	indexes, keys := corpusIndexes(tb)
	qs := corpusQueries(tb)
	keepAll := func(int, int) bool { return true }
	var q quality
	for _, c := range qs {
		hits := Search(c.Query, 20, indexes, keepAll)
		var got []string
		for _, h := range hits {
			got = append(got, keys[h.Index][h.Doc])
		}
		first := slices.IndexFunc(got, func(k string) bool { return slices.Contains(c.Answers, k) })
		var one figures
		one.queries, one.answers = 1, len(c.Answers)
		if first >= 0 {
			one.mrr = 1 / float64(first+1)
		}
		if first >= 0 && first < 5 {
			one.success5 = 1
		}
		for _, a := range c.Answers {
			if i := slices.Index(got, a); i >= 0 && i < 5 {
				one.recall5++
			}
		}
		if one.recall5 < float64(len(c.Answers)) {
			half := "tune"
			if heldOut(c.Query) {
				half = "held"
			}
			q.misses = append(q.misses, fmt.Sprintf("[%s] %q: want %v, got %v", half, c.Query, c.Answers, got[:min(5, len(got))]))
		}
		q.all.add(one)
		if heldOut(c.Query) {
			q.held.add(one)
		} else {
			q.tune.add(one)
		}
	}
	q.all.finish()
	q.held.finish()
	q.tune.finish()
	return q
}

// add sums one query's figures into f; finish turns the sums into means.
func (f *figures) add(one figures) {
	f.queries += one.queries
	f.answers += one.answers
	f.success5 += one.success5
	f.recall5 += one.recall5
	f.mrr += one.mrr
}

func (f *figures) finish() {
	f.success5 /= float64(f.queries)
	f.mrr /= float64(f.queries)
	f.recall5 /= float64(f.answers)
}

// BenchmarkSearchQuality prints the figures of all queries and of the
// held-out half; with -v, also those of the tuning half and every query
// that misses an answer in the first 5.
func BenchmarkSearchQuality(b *testing.B) {
	var q quality
	for range b.N {
		q = measure(b)
	}
	b.ReportMetric(q.all.success5, "success@5")
	b.ReportMetric(q.all.recall5, "recall@5")
	b.ReportMetric(q.all.mrr, "MRR")
	b.ReportMetric(q.held.success5, "held-success@5")
	b.ReportMetric(q.held.recall5, "held-recall@5")
	b.ReportMetric(q.held.mrr, "held-MRR")
	if testing.Verbose() {
		logMisses.Do(func() {
			for _, f := range []struct {
				name string
				f    figures
			}{{"all", q.all}, {"held-out", q.held}, {"tuning", q.tune}} {
				b.Logf("%-8s %3d queries %3d answers: success@5 %.3f recall@5 %.3f MRR %.3f",
					f.name, f.f.queries, f.f.answers, f.f.success5, f.f.recall5, f.f.mrr)
			}
			for _, m := range q.misses {
				b.Log(m)
			}
		})
	}
}

// logMisses lists the misses once, not once per run of the benchmark.
var logMisses sync.Once
