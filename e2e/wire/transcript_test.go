package wire

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// transcript is what one run of a script saw: a line per message sent
// (">") or received ("<"), and "#" lines saying what the script did
// besides (a policy edit). Values that vary from run to run are noted as
// they are seen and replaced when the transcript is written.
type transcript struct {
	lines []string
	// vars are values to replace, by class ("session", "pid"): each
	// distinct value becomes <class-N>, numbered by first appearance.
	vars map[string][]string
	// paths are temporary paths, replaced by their names.
	paths map[string]string
}

func newTranscript() *transcript {
	return &transcript{vars: map[string][]string{}, paths: map[string]string{}}
}

func (tr *transcript) add(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

// variable notes a value of class that is to be replaced.
func (tr *transcript) variable(class, value string) {
	if value != "" && !slices.Contains(tr.vars[class], value) {
		tr.vars[class] = append(tr.vars[class], value)
	}
}

// path notes a temporary path to replace by name (say "<lab>").
func (tr *transcript) path(path, name string) { tr.paths[path] = name }

// text is the transcript, normalized.
func (tr *transcript) text() string {
	return normalize(strings.Join(tr.lines, "\n")+"\n", tr.vars, tr.paths)
}

// check compares the transcript with its golden file, or writes the file
// with -update.
func (tr *transcript) check(t *testing.T, file string) {
	t.Helper()
	got := tr.text()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with go test ./e2e/wire -run 'TestWire/%s' -update)\ngot:\n%s", err, t.Name(), got)
	}
	if string(want) != got {
		t.Errorf("the transcript differs from %s (-want +got):\n%s", path, unifiedDiff(string(want), got, 3))
	}
}

// Placeholders by key: the value of each member with one of these names
// anywhere in a message.
var keyed = []struct {
	class string
	re    *regexp.Regexp
}{
	{"task", regexp.MustCompile(`"taskId":"((?:[^"\\]|\\.)*)"`)},
	{"state", regexp.MustCompile(`"requestState":"((?:[^"\\]|\\.)*)"`)},
}

// rfc3339 is a timestamp as the protocol writes them (createdAt,
// lastUpdatedAt).
var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)

// minRun is the length from which a run of one byte is written as
// <N×c>: a 300 KiB result stays one readable line, and its length is
// still checked to the byte.
const minRun = 64

// normalize replaces in text what varies between runs: the values of
// vars (classes given) and of the keyed members (taskId, requestState) in
// the lines received ("<"), each as <class-N> wherever it appears, N counting distinct values in order of first
// appearance, so that the same value is seen to recur; timestamps as
// <time>; temporary paths by name. It also shortens runs of one byte.
func normalize(text string, vars map[string][]string, paths map[string]string) string {
	all := map[string][]string{}
	for class, vs := range vars {
		all[class] = append(all[class], vs...)
	}
	// Only what mcpmux wrote: a value the script made up (a task id that
	// does not exist) is kept as it is.
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "<") {
			continue
		}
		for _, k := range keyed {
			for _, m := range k.re.FindAllStringSubmatch(line, -1) {
				if !slices.Contains(all[k.class], m[1]) {
					all[k.class] = append(all[k.class], m[1])
				}
			}
		}
	}
	var pairs []string
	for _, class := range slices.Sorted(mapKeys(all)) {
		vs := slices.Clone(all[class])
		vs = slices.DeleteFunc(vs, func(v string) bool { return !strings.Contains(text, v) })
		slices.SortStableFunc(vs, func(a, b string) int { return strings.Index(text, a) - strings.Index(text, b) })
		for i, v := range vs {
			pairs = append(pairs, v, fmt.Sprintf("<%s-%d>", class, i+1))
		}
	}
	// Longer paths first: a path inside another is replaced as itself.
	ps := slices.Sorted(mapKeys(paths))
	slices.SortStableFunc(ps, func(a, b string) int { return len(b) - len(a) })
	for _, p := range ps {
		pairs = append(pairs, p, paths[p])
	}
	if len(pairs) > 0 {
		text = strings.NewReplacer(pairs...).Replace(text)
	}
	text = rfc3339.ReplaceAllString(text, "<time>")
	return shortenRuns(text)
}

// shortenRuns writes each run of at least minRun equal bytes as <N×c>.
func shortenRuns(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j] == s[i] {
			j++
		}
		if j-i >= minRun {
			fmt.Fprintf(&b, "<%d×%c>", j-i, s[i])
		} else {
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// unifiedDiff returns the lines of want and got that differ, with context
// lines of context around each change, as diff -u prints them.
func unifiedDiff(want, got string, context int) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:]: transcripts are a few hundred lines at most.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line number in a of ' ' and '-', in b of '+'
		bi   int
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i, j})
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], i, j})
			i++
		default:
			ops = append(ops, op{'+', b[j], i, j})
			j++
		}
	}
	var out strings.Builder
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-context)
		end := k
		// A hunk runs on while the next change is within 2*context lines.
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			n := end
			for n < len(ops) && ops[n].kind == ' ' {
				n++
			}
			if n == len(ops) || n-end > 2*context {
				end = min(len(ops), end+context)
				break
			}
			end = n
		}
		aLen, bLen := 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				aLen++
			}
			if o.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", ops[start].ai+1, aLen, ops[start].bi+1, bLen)
		for _, o := range ops[start:end] {
			fmt.Fprintf(&out, "%c%s\n", o.kind, o.text)
		}
		k = end
	}
	return out.String()
}
