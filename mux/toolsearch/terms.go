package toolsearch

import (
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// Terms are the words of text as the index compares them: split at
// anything that is not a letter or digit and inside camelCase
// ("getFileInfo" is get, file, info), lowercased, common English words
// left out, and each cut to a stem, so that "files", "listing" and
// "created" meet "file", "list" and "create".
func Terms(text string) []string { return stems(nil).terms(text) }

// stems remembers the stem of each word it has cut: a catalog's tools use
// a few thousand words many times over, and the stemmer is the costly
// part of indexing them. A nil stems remembers nothing.
type stems map[string]string

func (st stems) terms(text string) []string {
	var out []string
	for _, w := range words(text) {
		if stopwords[w] {
			continue
		}
		s, ok := st[w]
		switch {
		case ok:
		case st == nil:
			// A query's words: its path never touches the indexes' shared
			// stems, nor fills them with what callers type.
			s = stem(w)
		default:
			s = sharedStem(w)
			st[w] = s
		}
		out = append(out, s)
	}
	return out
}

// words are the lowercased words of text, split as Terms says, but for
// a lone letter: the tail of a possessive or a contraction ("what's",
// "else's") or a flag ("-p"), which says nothing.
func words(text string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		w := strings.ToLower(string(word))
		word = word[:0]
		if len(w) > 1 || unicode.IsDigit(rune(w[0])) {
			out = append(out, w)
		}
	}
	rs := []rune(text)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			// A new word at a lower-to-upper step (fileInfo) and at the
			// last capital of a run before a lower one (HTTPServer); a
			// plural of capitals (READMEs, URLs) is one word.
			if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) ||
				unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]) && !pluralTail(rs, i+1)) {
				flush()
			}
			word = append(word, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// pluralTail says whether rs[i] is the "s" that ends a word of capitals:
// "URLs", but not "URLServer".
func pluralTail(rs []rune, i int) bool {
	return rs[i] == 's' && (i+1 == len(rs) || !unicode.IsLetter(rs[i+1]) && !unicode.IsDigit(rs[i+1]))
}

// shared are the stems of words any index has cut, up to maxShared of
// them: each child's index is built anew when its tools change, with
// mostly the words it had, and those of other children.
var shared struct {
	sync.RWMutex
	stems map[string]string
}

const maxShared = 1 << 14

func sharedStem(w string) string {
	shared.RLock()
	s, ok := shared.stems[w]
	shared.RUnlock()
	if ok {
		return s
	}
	s = stem(w)
	shared.Lock()
	if shared.stems == nil {
		shared.stems = map[string]string{}
	}
	if len(shared.stems) < maxShared {
		shared.stems[strings.Clone(w)] = s
	}
	shared.Unlock()
	return s
}

// stem is w's Porter2 (Snowball English) stem, the same for a query and a
// tool, so that both meet at one form ("creates", "created", "creating"
// and "create" are all "creat"; "aggregation" and "aggregate" "aggreg").
func stem(w string) string { return english.Stem(w, true) }

// stopwords say nothing of what a tool does: the small words of English,
// and those that count or qualify ("how many", "every", "someone else's").
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be by can could do does for from has have how i if in
		into is it its me my of on or our please should so some than that the their them then there these this
		those to up us was we were what when where which while who will with would you your want need let
		much many very just also any each every other else own same such`) {
		m[w] = true
	}
	return m
}()

// synonyms are words a caller uses for what tools call otherwise, by
// stem: the verbs of tool names, and a few nouns. A query's word brings
// its synonyms in at a lower weight.
var synonyms = buildSynonyms()

func buildSynonyms() map[string][]string {
	m := map[string][]string{}
	for _, g := range synonymGroups {
		var stems []string
		for _, w := range g {
			stems = append(stems, stem(w))
		}
		for _, s := range stems {
			for _, o := range stems {
				if o != s {
					m[s] = append(m[s], o)
				}
			}
		}
	}
	return m
}

// SynonymGroups are the synonyms' groups as written, each words that mean
// one thing, for an engine measured beside this one.
func SynonymGroups() [][]string {
	out := make([][]string, len(synonymGroups))
	for i, g := range synonymGroups {
		out[i] = slices.Clone(g)
	}
	return out
}

// synonymGroups are written from general knowledge of what tools are
// called, not from the benchmark's queries. Words that tools' descriptions
// use for much else are left out of them ("new", "open", "load", "url",
// "message", "make"): as synonyms they found more noise than tools.
var synonymGroups = [][]string{
	{"delete", "remove", "erase", "drop", "destroy"},
	{"create", "add", "insert"},
	{"get", "fetch", "retrieve", "read", "show", "view"},
	{"list", "enumerate", "all"},
	{"search", "find", "lookup", "query", "look"},
	{"update", "edit", "modify", "change", "patch"},
	{"switch", "set", "change", "use"},
	{"run", "execute", "exec", "invoke", "start"},
	{"evaluate", "eval", "run", "execute"},
	{"send", "post"},
	{"write", "save", "store", "put"},
	{"move", "rename"},
	{"fork", "copy", "clone", "duplicate"},
	{"directory", "folder", "dir"},
	{"file", "document"},
	{"screenshot", "capture", "snapshot"},
	{"navigate", "goto", "visit", "browse"},
	{"repository", "repo"},
	{"pull", "pr", "merge"},
	{"comment", "reply"},
	{"issue", "ticket", "bug"},
	{"user", "member", "person", "people"},
	{"stop", "kill", "terminate", "cancel"},
	{"log", "logs"},
	{"click", "press", "tap"},
	{"type", "fill", "enter"},
	{"invoice", "bill"},
	{"aggregate", "aggregation", "group"},
	{"sql", "query", "table", "row"},
}
