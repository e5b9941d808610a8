package toolsearch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// acceptable tools counts each), MRR the mean of 1/r (0 past 20).

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

// quality is the corpus's figures, and the queries not found in the first
// 5 with what came first instead.
type quality struct {
	success5, recall5, mrr float64
	misses                 []string
}

func measure(tb testing.TB) quality {
	indexes, keys := corpusIndexes(tb)
	qs := corpusQueries(tb)
	all := func(int, int) bool { return true }
	var q quality
	var answers, found5 int
	for _, c := range qs {
		hits := Search(c.Query, 20, indexes, all)
		var got []string
		for _, h := range hits {
			got = append(got, keys[h.Index][h.Doc])
		}
		first := slices.IndexFunc(got, func(k string) bool { return slices.Contains(c.Answers, k) })
		if first >= 0 {
			q.mrr += 1 / float64(first+1)
		}
		if first >= 0 && first < 5 {
			q.success5++
		} else {
			q.misses = append(q.misses, fmt.Sprintf("%q: want %v, got %v", c.Query, c.Answers, got[:min(5, len(got))]))
		}
		answers += len(c.Answers)
		for _, a := range c.Answers {
			if i := slices.Index(got, a); i >= 0 && i < 5 {
				found5++
			}
		}
	}
	n := float64(len(qs))
	q.success5 /= n
	q.mrr /= n
	q.recall5 = float64(found5) / float64(answers)
	return q
}

func BenchmarkSearchQuality(b *testing.B) {
	var q quality
	for range b.N {
		q = measure(b)
	}
	b.ReportMetric(q.success5, "success@5")
	b.ReportMetric(q.recall5, "recall@5")
	b.ReportMetric(q.mrr, "MRR")
	if testing.Verbose() {
		for _, m := range q.misses {
			b.Log(m)
		}
	}
}
