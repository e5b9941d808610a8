package toolsearch

import (
	"slices"
	"strings"
	"unicode"
)

// Terms are the words of text as the index compares them: split at
// anything that is not a letter or digit and inside camelCase
// ("getFileInfo" is get, file, info), lowercased, common English words
// left out, and each cut to a stem, so that "files", "listing" and
// "created" meet "file", "list" and "create".
func Terms(text string) []string {
	var out []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		w := strings.ToLower(string(word))
		word = word[:0]
		if !stopwords[w] {
			out = append(out, stem(w))
		}
	}
	rs := []rune(text)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			// A new word at a lower-to-upper step (fileInfo) and at the
			// last capital of a run before a lower one (HTTPServer).
			if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) ||
				unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
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

// stem cuts the common English endings of w: plurals, -ing, -ed and a
// final e, the same way for a query and a tool, so that both meet at one
// form ("creates", "created", "creating" and "create" are all "creat").
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = undouble(w[:len(w)-2])
	}
	if strings.HasSuffix(w, "e") && len(w) > 4 {
		w = w[:len(w)-1]
	}
	return w
}

// undouble drops the second of a doubled final consonant ("runn" of
// "running" is "run").
func undouble(w string) string {
	n := len(w)
	if n >= 3 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouls", rune(w[n-1])) {
		return w[:n-1]
	}
	return w
}

// stopwords say nothing of what a tool does.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be by can could do does for from has have how i if in
		into is it its me my of on or our please should so some than that the their them then there these this
		those to up us was we were what when where which while who will with would you your want need let`) {
		m[w] = true
	}
	return m
}()

// synonyms are words a caller uses for what tools call otherwise, by
// stem: the verbs of tool names, and a few nouns. A query's word brings
// its synonyms in at a lower weight.
var synonyms = func() map[string][]string {
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
}()

// SynonymGroups are the synonyms' groups as written, each words that mean
// one thing, for an engine measured beside this one.
func SynonymGroups() [][]string {
	out := make([][]string, len(synonymGroups))
	for i, g := range synonymGroups {
		out[i] = slices.Clone(g)
	}
	return out
}

var synonymGroups = [][]string{
	{"delete", "remove", "erase", "drop", "destroy"},
	{"create", "make", "add", "new", "insert"},
	{"get", "fetch", "retrieve", "read", "show", "view", "open", "load"},
	{"list", "enumerate", "all"},
	{"search", "find", "lookup", "query", "look"},
	{"update", "edit", "modify", "change", "set", "patch"},
	{"run", "execute", "exec", "invoke", "start"},
	{"send", "post", "message"},
	{"write", "save", "store", "put"},
	{"move", "rename"},
	{"directory", "folder", "dir"},
	{"file", "document"},
	{"screenshot", "capture", "snapshot"},
	{"navigate", "goto", "visit", "browse", "url"},
	{"repository", "repo"},
	{"pull", "pr", "merge"},
	{"comment", "reply"},
	{"issue", "ticket", "bug"},
	{"user", "member", "person", "people"},
	{"stop", "kill", "terminate", "cancel"},
	{"log", "logs"},
	{"click", "press", "tap"},
	{"type", "fill", "enter"},
}
