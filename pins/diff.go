package pins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxDiffLines bounds the lines of one field that WriteDiff compares line
// by line; a longer field is shown whole, old then new.
const maxDiffLines = 2000

// WriteDiff writes a readable diff of the fields that differ between a pin
// and a live definition, for a reviewer: each changed field as indented
// JSON, with "-" before what the pin has and "+" before what is live now.
// pinned or live may be nil: a tool never pinned, or one that is gone.
// A rune that is not graphic (a control, a bidi override, a zero-width
// one) is written escaped, as strconv.QuoteToGraphic would, so that what
// the reviewer's terminal shows is what the definition holds; in the JSON
// shown, a backslash the definition holds is itself escaped, so an
// escape written here cannot be mistaken for text.
func WriteDiff(w io.Writer, pinned *Pin, live *Def) {
	var old, cur Def
	if pinned != nil {
		old = pinned.Def
	}
	if live != nil {
		cur = *live
	}
	for _, k := range Changed(old, cur) {
		fmt.Fprintf(w, "  %s:\n", graphic(k)) // a key is the child's too
		a, b := lines(old.Field(k)), lines(cur.Field(k))
		for _, l := range lineDiff(a, b) {
			fmt.Fprintf(w, "    %c %s\n", l.op, graphic(l.text))
		}
	}
}

// graphic is s with every rune strconv.IsGraphic refuses escaped.
func graphic(s string) string {
	if !strings.ContainsFunc(s, notGraphic) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if notGraphic(r) {
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func notGraphic(r rune) bool { return !strconv.IsGraphic(r) }

// lines is a canonical JSON value indented, one line per element; nil for
// an absent field.
func lines(v string) []string {
	if v == "" {
		return nil
	}
	var b bytes.Buffer
	if json.Indent(&b, []byte(v), "", "  ") != nil {
		return []string{v}
	}
	return strings.Split(b.String(), "\n")
}

type diffLine struct {
	op   byte // ' ', '-' or '+'
	text string
}

// lineDiff is a longest-common-subsequence diff of a and b.
func lineDiff(a, b []string) []diffLine {
	var out []diffLine
	if len(a) > maxDiffLines || len(b) > maxDiffLines {
		for _, l := range a {
			out = append(out, diffLine{'-', l})
		}
		for _, l := range b {
			out = append(out, diffLine{'+', l})
		}
		return out
	}
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
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
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, diffLine{' ', a[i]})
			i++
			j++
		case j == len(b) || i < len(a) && lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{'-', a[i]})
			i++
		default:
			out = append(out, diffLine{'+', b[j]})
			j++
		}
	}
	return out
}
