package toolsearch

import (
	"container/heap"
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Doc is one tool as the index reads it.
type Doc struct {
	Name        string // exposed
	Orig        string // the child's own
	Server      string // its alias
	Title       string
	Description string
	Params      []Param
}

// Param is one parameter of a tool's input schema.
type Param struct{ Name, Description string }

// DocOf is the Doc of a tool exposed as name, of server, whose own name is
// orig and whose definition (as tools/list has it) is def. A part of def
// that is not what MCP says it is is left out.
func DocOf(name, orig, server string, def []byte) Doc {
	var d struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		InputSchema struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		} `json:"inputSchema"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
	}
	_ = json.Unmarshal(def, &d)
	doc := Doc{Name: name, Orig: orig, Server: server, Title: d.Title, Description: d.Description}
	if doc.Title == "" {
		doc.Title = d.Annotations.Title
	}
	for p, s := range d.InputSchema.Properties {
		doc.Params = append(doc.Params, Param{Name: p, Description: s.Description})
	}
	// Map order is random: the index is the same whatever it was.
	slices.SortFunc(doc.Params, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
	return doc
}

// How much a word counts in each field of a tool: its name and title say
// what it does, its description says it in more words, its parameters
// tell what it works on.
const (
	weightName, weightTitle, weightServer, weightParamName, weightDesc, weightParamDesc = 2, 2, 1.5, 1, 1, 0.5
	weightSynonym                                                                       = 0.6 // a query word's synonym, against the word itself
	// nameBoost is what a query word in the tool's own name or title adds,
	// times its idf, besides the BM25 of every field: BM25's saturation
	// makes one more mention in a long description count almost as much.
	nameBoost     = 0.5
	bm25K1, bm25B = 1.5, 0.75
)

const (
	bonusExactName   = 1e6 // the query is the tool's name
	bonusNamePrefix  = 1e3 // the query begins the tool's name
	maxDescribedRune = 4096
)

// Index is the searchable form of one child's tools; it is immutable once
// built. A query is ranked over several indexes at once (Search), so that
// each child's is built only when its tools change.
type Index struct {
	names    []string  // lowercased exposed names
	origs    []string  // lowercased own names
	lens     []float32 // weighted length of each doc
	totalLen float64
	postings map[string][]posting
}

type posting struct {
	at uint32  // the doc, and inName if the term is in its own name or title
	tf float32 // weighted
}

// inName marks a posting's term as one of its doc's name or title: a bit
// of at rather than a field of its own, which would make every posting
// half as large again.
const inName = 1 << 31

func (p posting) doc() int32 { return int32(p.at &^ inName) }
func (p posting) name() bool { return p.at&inName != 0 }

// New indexes docs; doc i of the index is docs[i].
func New(docs []Doc) *Index {
	ix := &Index{names: make([]string, len(docs)), origs: make([]string, len(docs)), lens: make([]float32, len(docs)),
		postings: map[string][]posting{}}
	tf := map[string]float32{}
	named := map[string]bool{}
	st := stems{}
	for i, d := range docs {
		clear(tf)
		clear(named)
		var n float32 // summed in field order, so that it is the same each time
		add := func(t string, w float32) {
			tf[t] += w
			n += w
		}
		addAll := func(text string, w float32) {
			for _, t := range st.terms(text) {
				add(t, w)
			}
		}
		// The tool's own name and its title say what it does; what the
		// exposed name adds to the own name is the server's prefix.
		own := d.Orig
		if own == "" {
			own = d.Name
		}
		for _, t := range st.terms(own) {
			add(t, weightName)
			named[t] = true
		}
		for _, t := range st.terms(d.Name) {
			if !named[t] {
				add(t, weightServer)
			}
		}
		for _, t := range st.terms(d.Title) {
			add(t, weightTitle)
			named[t] = true
		}
		addAll(d.Server, weightServer)
		addAll(truncate(d.Description), weightDesc)
		for _, p := range d.Params {
			addAll(p.Name, weightParamName)
			addAll(truncate(p.Description), weightParamDesc)
		}
		for t, f := range tf {
			p := posting{at: uint32(i), tf: f}
			if named[t] {
				p.at |= inName
			}
			ix.postings[t] = append(ix.postings[t], p)
		}
		ix.lens[i] = n
		ix.totalLen += float64(n)
		ix.names[i] = strings.ToLower(d.Name)
		ix.origs[i] = strings.ToLower(d.Orig)
	}
	// The lists grew by appending, up to twice what they hold: they are
	// copied into one array of the size they are, what the index keeps.
	total := 0
	for _, ps := range ix.postings {
		total += len(ps)
	}
	all := make([]posting, 0, total)
	for t, ps := range ix.postings {
		at := len(all)
		all = append(all, ps...)
		ix.postings[t] = all[at:len(all):len(all)]
	}
	return ix
}

// Len is how many tools ix holds.
func (ix *Index) Len() int { return len(ix.lens) }

// truncate bounds how much of a long description is read: a child may
// send megabytes, and the start says what a tool is for.
func truncate(s string) string {
	if len(s) <= maxDescribedRune {
		return s
	}
	return s[:maxDescribedRune]
}

// Hit is one tool found: doc Doc of index Index of those searched.
type Hit struct {
	Index, Doc int
	Score      float64
}

// Search ranks the tools of indexes for query and returns the best limit
// of those keep accepts, best first; ties keep the indexes' order. A tool
// whose name is the query comes first, then those whose name it begins,
// then the rest by BM25 over their words; a tool that shares no word with
// the query is not found. keep is asked in that order, once a tool, until
// limit are kept.
func Search(query string, limit int, indexes []*Index, keep func(index, doc int) bool) []Hit {
	q := strings.ToLower(strings.TrimSpace(query))
	if limit <= 0 || q == "" {
		return nil
	}
	words := queryTerms(q)
	// The statistics of the whole set: each index is one child's.
	var docs int
	var total float64
	for _, ix := range indexes {
		docs += ix.Len()
		total += ix.totalLen
	}
	if docs == 0 {
		return nil
	}
	avg := total / float64(docs)
	idf := make([]float64, len(words))
	for k, w := range words {
		df := 0
		for _, ix := range indexes {
			df += len(ix.postings[w.term])
		}
		if df > 0 {
			idf[k] = math.Log(1 + (float64(docs)-float64(df)+0.5)/(float64(df)+0.5))
		}
	}
	// One score per doc of every index, doc d of index i at base[i]+d.
	base := make([]int, len(indexes))
	for i := 1; i < len(indexes); i++ {
		base[i] = base[i-1] + indexes[i-1].Len()
	}
	scores := make([]float64, docs)
	for i, ix := range indexes {
		at := scores[base[i]:]
		for k, w := range words {
			for _, p := range ix.postings[w.term] {
				tf := float64(p.tf)
				norm := bm25K1 * (1 - bm25B + bm25B*float64(ix.lens[p.doc()])/avg)
				at[p.doc()] += w.weight * idf[k] * tf * (bm25K1 + 1) / (tf + norm)
				if p.name() {
					at[p.doc()] += nameBoost * w.weight * idf[k]
				}
			}
		}
		for d := range ix.names {
			// A name match counts even with no word in common
			// ("get_file_info" for "get_file").
			if ix.names[d] == q || ix.origs[d] == q {
				at[d] += bonusExactName
			} else if strings.HasPrefix(ix.names[d], q) || strings.HasPrefix(ix.origs[d], q) {
				at[d] += bonusNamePrefix
			}
		}
	}
	cands := make(ranked, 0, 256)
	for i := range indexes {
		for d, sc := range scores[base[i] : base[i]+indexes[i].Len()] {
			if sc > 0 {
				cands = append(cands, Hit{Index: i, Doc: d, Score: sc})
			}
		}
	}
	// Best first, asking keep only of those that could be among them: a
	// caller may see few of many.
	heap.Init(&cands)
	var hits []Hit
	for len(hits) < limit && cands.Len() > 0 {
		h := heap.Pop(&cands).(Hit)
		if keep(h.Index, h.Doc) {
			hits = append(hits, h)
		}
	}
	return hits
}

// ranked is a heap of hits, best first; ties keep the indexes' order.
type ranked []Hit

func (r ranked) Len() int { return len(r) }
func (r ranked) Less(i, j int) bool {
	a, b := r[i], r[j]
	switch {
	case a.Score != b.Score:
		return a.Score > b.Score
	case a.Index != b.Index:
		return a.Index < b.Index
	}
	return a.Doc < b.Doc
}
func (r ranked) Swap(i, j int) { r[i], r[j] = r[j], r[i] }
func (r *ranked) Push(x any)   { *r = append(*r, x.(Hit)) }
func (r *ranked) Pop() any {
	old := *r
	h := old[len(old)-1]
	*r = old[:len(old)-1]
	return h
}
