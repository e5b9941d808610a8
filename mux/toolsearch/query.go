package toolsearch

import "strings"

// queryTerm is one term a query is ranked by, with its weight: one of the
// query's words, a synonym of some, or two of its words joined.
type queryTerm struct {
	term   string
	weight float64
}

// queryTerms are the terms of the query: its own words at 1, its joined
// pairs and the synonyms of its words at weightSynonym each.
func queryTerms(q string) []queryTerm {
	at := map[string]int{}
	var out []queryTerm
	var joined []string
	for _, t := range queryWords(q, &joined) {
		if _, dup := at[t]; !dup {
			at[t] = len(out)
			out = append(out, queryTerm{term: t, weight: 1})
		}
	}
	n := len(out)
	for _, t := range joined {
		if _, dup := at[t]; !dup {
			at[t] = len(out)
			out = append(out, queryTerm{term: t, weight: weightSynonym})
		}
	}
	// Two words of the query that mean one thing ("ticket", "bug") count
	// it more, never more than the thing named.
	for _, own := range out[:n:n] {
		for _, s := range synonyms[own.term] {
			j, ok := at[s]
			if !ok {
				j = len(out)
				at[s] = j
				out = append(out, queryTerm{term: s})
			}
			if out[j].weight < 1 {
				out[j].weight = min(1, out[j].weight+weightSynonym)
			}
		}
	}
	return out
}

// queryWords are the terms of a query: Terms of its text, but that a URL
// or a domain stands for the term "url" (its words are what a tool is
// given, not what it does: "example.com/blog/post" is no blog tool), a file
// name adds the term "file" ("config.yaml"), and two words written apart
// that a tool writes as one also meet it joined ("back up" and "backup",
// "mouse over" and "mouseover").
func queryWords(q string, joined *[]string) []string {
	var out []string
	var prev string // the word before, as written
	for _, field := range strings.Fields(q) {
		switch {
		case isURL(field):
			out = append(out, urlTerms(field)...)
			prev = ""
			continue
		case isFileName(field):
			out = append(out, "file")
		}
		for _, w := range words(field) {
			if prev != "" {
				*joined = append(*joined, stem(prev+w), stem(stem(prev)+w))
			}
			prev = w
			if !stopwords[w] {
				out = append(out, stem(w))
			}
		}
	}
	return out
}

// isURL says whether a word of a query is a URL or a domain name:
// "https://...", "www...." or name.tld[/path] with a common top-level
// domain.
func isURL(f string) bool {
	f = strings.Trim(strings.ToLower(f), "\"'()<>,;")
	if strings.Contains(f, "://") || strings.HasPrefix(f, "www.") {
		return true
	}
	host, _, _ := strings.Cut(f, "/")
	dot := strings.LastIndexByte(host, '.')
	return dot > 0 && topLevelDomains[host[dot+1:]]
}

// urlTerms are what a URL says of the tool it is for: a web address is
// for a tool that takes a URL, and its host may name the service
// ("figma.com/file/abc"); its path is the tool's argument. Another scheme
// names what it connects to ("mongodb://localhost").
func urlTerms(f string) []string {
	f = strings.Trim(strings.ToLower(f), "\"'()<>,;")
	scheme, rest, ok := strings.Cut(f, "://")
	if !ok {
		scheme, rest = "http", f
	}
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, ":")
	host = strings.TrimPrefix(host, "www.")
	if dot := strings.LastIndexByte(host, '.'); dot > 0 && topLevelDomains[host[dot+1:]] {
		host = host[:dot]
	}
	var out []string
	switch scheme {
	case "http", "https":
		out = append(out, "url")
	default:
		out = append(out, Terms(scheme)...)
	}
	return append(out, Terms(host)...)
}

// isFileName says whether a word of a query names a file by a common
// extension ("config.yaml", "photo.png"). "js" is not one of them: "Next.js"
// is more often a library than a file.
func isFileName(f string) bool {
	f = strings.Trim(strings.ToLower(f), "\"'()<>,;:?!")
	dot := strings.LastIndexByte(f, '.')
	return dot > 0 && !strings.Contains(f, "://") && fileExtensions[f[dot+1:]]
}

var topLevelDomains = setOf("com org net io dev app ai co edu gov info biz me us uk de eu")

var fileExtensions = setOf(`txt md markdown rst json yaml yml toml ini cfg conf env xml csv tsv log
	png jpg jpeg gif svg webp bmp ico pdf doc docx xls xlsx ppt pptx zip tar gz tgz bz2 7z
	html htm css go py ts tsx jsx rb rs java kt c h cpp hpp cs php sh bash sql lock mp3 mp4 wav mov`)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
