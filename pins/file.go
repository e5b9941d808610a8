package pins

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mcpmux/mcpmux/internal/fileerr"
)

// fileFormat is the format of the pin files written: 2, whose pins cover
// every member of a definition. A file without a format line is of format
// 1, whose pins are all partial (Pin.Partial); a partial pin in a file of
// format 2 is marked v1.
const fileFormat = "2"

const fileHeader = `# mcpmux pin file: the tool and prompt definitions approved for use.
# Review it like go.sum, and commit it. Each entry is "KIND NAME DIGEST",
# then its canonical fields, one per line, as canonical JSON: every member
# of the definition as a client sees it (a key that is not [A-Za-z0-9_$.~-]
# is written as a JSON string). An entry marked v1 was pinned by an older
# mcpmux and covers only some fields; mcpmux pins it whole when it next
# sees its definition unchanged in those.
# See what changed with "mcpmux pins diff"; approve with "mcpmux pins approve".
`

// write writes the pin file holding s to w: stable order, one entry per
// pin, one field per line, so that a change reads as a change of lines in
// a diff.
func (s *Set) write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(fileHeader)
	bw.WriteString("\nformat " + fileFormat + "\n")
	for _, p := range s.All() {
		for _, part := range []string{"\n", string(p.Kind), " ", p.Name, " ", p.Digest} {
			bw.WriteString(part)
		}
		if p.Partial {
			bw.WriteString(" " + partialMark)
		}
		bw.WriteString("\n")
		for _, f := range p.Fields {
			bw.WriteString("  ")
			bw.Write(appendKey(nil, f.Key))
			for _, part := range []string{" ", f.Value, "\n"} {
				bw.WriteString(part)
			}
		}
	}
	return bw.Flush()
}

// partialMark ends the header line of a partial pin in a file of format 2.
const partialMark = "v1"

// headerLine reads "KIND NAME DIGEST" and an optional " v1": tool or
// prompt, a name of [A-Za-z0-9_-], sha256: and 64 lower-case hex digits.
func headerLine(line string) (kind Kind, name, digest string, partial, ok bool) {
	k, rest, _ := strings.Cut(line, " ")
	name, rest, _ = strings.Cut(rest, " ")
	digest, mark, marked := strings.Cut(rest, " ")
	if k != string(Tool) && k != string(Prompt) || name == "" || strings.Trim(name, nameChars) != "" {
		return "", "", "", false, false
	}
	if _, ok := ParseSum(digest); !ok || strings.ToLower(digest) != digest || marked && mark != partialMark {
		return "", "", "", false, false
	}
	return Kind(k), name, digest, marked, true
}

// fieldLine reads "  KEY JSON": two spaces, a key (bare, or a JSON string
// when it cannot be bare), a space and a value of at least one character.
// A key that is not written as appendKey writes it is an error.
func fieldLine(line string) (key, value string, ok bool, err error) {
	rest, ok := strings.CutPrefix(line, "  ")
	if !ok || rest == "" {
		return "", "", false, nil
	}
	if rest[0] != '"' {
		key, value, _ = strings.Cut(rest, " ")
		if key == "" || value == "" || strings.Trim(key, bareKeyChars) != "" {
			return "", "", false, nil
		}
		return key, value, true, nil
	}
	end := 1
	for end < len(rest) && rest[end] != '"' {
		if rest[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(rest) || end+2 >= len(rest) || rest[end+1] != ' ' {
		return "", "", false, nil
	}
	quoted, value := rest[:end+1], rest[end+2:]
	if err := json.Unmarshal([]byte(quoted), &key); err != nil {
		return "", "", false, fmt.Errorf("field key %s: %w", clip(quoted), err)
	}
	if string(appendKey(nil, key)) != quoted {
		return "", "", false, fmt.Errorf("field key %s is not written in canonical form (%s)", clip(quoted), clip(string(appendKey(nil, key))))
	}
	return key, value, true, nil
}

// appendKey appends a field's key as the pin file writes it: bare when it
// is made of bareKeyChars, else as a canonical JSON string.
func appendKey(b []byte, key string) []byte {
	if key != "" && strings.Trim(key, bareKeyChars) == "" {
		return append(b, key...)
	}
	return appendEscaped(b, stringBytes(key))
}

const (
	letters      = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	nameChars    = letters + "0123456789_-"
	bareKeyChars = nameChars + "$.~"
)

// Parse reads a pin file. It is strict: every problem is reported, as
// FILE:LINE (file is the name used in errors), and any problem fails the
// whole file, so that a half-edited file never stands for fewer pins.
func Parse(file string, data []byte) (*Set, error) {
	var errs fileerr.Errors
	fail := func(line int, format string, a ...any) {
		errs = append(errs, &fileerr.Error{File: file, Line: line, Msg: fmt.Sprintf(format, a...)})
	}
	set := &Set{pins: map[key]Pin{}}
	var cur *Pin
	var curLine int
	format := "1"
	formatLine := 0
	finish := func() {
		if cur == nil {
			return
		}
		switch {
		case cur.Field(fieldServer) == "" || cur.Field(fieldName) == "":
			fail(curLine, "%s %s: it needs both %q and %q", cur.Kind, cur.Name, fieldServer, fieldName)
		case cur.Def.Digest() != cur.Digest:
			fail(curLine, "%s %s: the digest does not match its fields (approve with mcpmux pins approve rather than edit by hand)", cur.Kind, cur.Name)
		default:
			set.pins[key{cur.Kind, cur.Name}] = *cur
		}
		cur = nil
	}
	seen := map[key]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if f, ok := strings.CutPrefix(line, "format "); ok {
			switch {
			case formatLine > 0:
				fail(n, "a second format line (the first on line %d)", formatLine)
			case len(seen) > 0:
				fail(n, "the format line must come before every entry")
			case f != fileFormat:
				fail(n, "format %q: this mcpmux reads pin files of format 1 (no format line) and %s; a newer mcpmux wrote it", clip(f), fileFormat)
			}
			format, formatLine = f, n
			continue
		}
		if kind, name, digest, marked, ok := headerLine(line); ok {
			finish()
			k := key{kind, name}
			if first, dup := seen[k]; dup {
				fail(n, "%s %s is pinned twice (first on line %d)", k.kind, k.name, first)
			}
			if marked && format != fileFormat {
				fail(n, "%s %s: a %s mark in a file without a format line (every pin of it is of the first form)", k.kind, k.name, partialMark)
			}
			seen[k] = n
			cur, curLine = &Pin{Def: Def{Kind: k.kind, Name: k.name}, Digest: digest, Partial: marked || format != fileFormat}, n
			continue
		}
		field, value, ok, err := fieldLine(line)
		switch {
		case err != nil:
			fail(n, "%v", err)
			continue
		case !ok:
			fail(n, `expected "tool NAME sha256:HEX", "prompt NAME sha256:HEX" or an indented "FIELD JSON", not %q`, clip(line))
			continue
		case cur == nil:
			fail(n, "field %q before any tool or prompt", field)
			continue
		case cur.Partial && !partialField(cur.Kind, field):
			fail(n, "%s %s: %q is not a field of a %s pin of the first form (%s)", cur.Kind, cur.Name, field, cur.Kind, partialWhy(format))
			continue
		case cur.Field(field) != "":
			fail(n, "%s %s: field %q twice", cur.Kind, cur.Name, field)
			continue
		}
		canonical, err := isCanonical([]byte(value))
		if err != nil {
			fail(n, "%s %s: field %q: not JSON: %v", cur.Kind, cur.Name, field, err)
			continue
		}
		if !canonical {
			fail(n, "%s %s: field %q is not in canonical form", cur.Kind, cur.Name, field)
			continue
		}
		if last := len(cur.Fields); last > 0 && compareStrings(cur.Fields[last-1].Key, field) > 0 {
			fail(n, "%s %s: fields must be sorted by key", cur.Kind, cur.Name)
			continue
		}
		cur.Fields = append(cur.Fields, Field{field, value})
	}
	finish()
	if len(errs) > 0 {
		return nil, errs
	}
	return set, nil
}

func partialField(k Kind, f string) bool {
	return f == fieldServer || f == fieldName || slices.Contains(partialFields[k], f)
}

// partialWhy says why an entry is of the first form.
func partialWhy(format string) string {
	if format == fileFormat {
		return "marked " + partialMark
	}
	return "the file has no format " + fileFormat + " line"
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
