package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// refCanonicalJSON is the first canonical form, kept as the reference the
// scanner is held to: decoded into any with UseNumber, written back.
func refcanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	var b bytes.Buffer
	refWrite(&b, v)
	return b.Bytes(), nil
}

func refWrite(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case json.Number:
		b.WriteString(string(v))
	case string:
		refString(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			refWrite(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, refCompare)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			refString(b, k)
			b.WriteByte(':')
			refWrite(b, v[k])
		}
		b.WriteByte('}')
	}
}

func refCompare(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] == rb[i] {
			continue
		}
		ua, ub := utf16Key(ra[i]), utf16Key(rb[i])
		if ua != ub {
			return int(ua) - int(ub)
		}
		return int(ra[i]) - int(rb[i])
	}
	return len(ra) - len(rb)
}

func refString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// refWholeDigest is Canonical and Digest as the reference reads them:
// every member decoded (of a key given twice, the last), "name" and nulls
// dropped, "server" (after any '~') given one '~' more, the child's name
// and the alias added, written back sorted and hashed.
func refWholeDigest(alias, childName string, def []byte) (string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(def, &members); err != nil {
		return "", err
	}
	fields := map[string]string{}
	for k, raw := range members {
		if k == fieldName || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if strings.TrimLeft(k, "~") == fieldServer {
			k = "~" + k
		}
		v, err := refcanonicalJSON(raw)
		if err != nil {
			return "", err
		}
		fields[k] = string(v)
	}
	var n, s bytes.Buffer
	refString(&n, childName)
	refString(&s, alias)
	fields[fieldName], fields[fieldServer] = n.String(), s.String()
	keys := slices.SortedFunc(maps.Keys(fields), refCompare)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		refString(&b, k)
		b.WriteByte(':')
		b.WriteString(fields[k])
	}
	b.WriteByte('}')
	sum := sha256.Sum256(b.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// refPartialDigest is the first Canonical and Digest: every member
// decoded, the kind's partial fields written back by the reference.
func refPartialDigest(kind Kind, alias, childName string, def []byte) (string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(def, &members); err != nil {
		return "", err
	}
	var fields []Field
	for _, k := range partialFields[kind] {
		raw, ok := members[k]
		if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		v, err := refcanonicalJSON(raw)
		if err != nil {
			return "", err
		}
		fields = append(fields, Field{k, string(v)})
	}
	var n, s bytes.Buffer
	refString(&n, childName)
	refString(&s, alias)
	fields = append(fields, Field{fieldName, n.String()}, Field{fieldServer, s.String()})
	slices.SortFunc(fields, func(a, b Field) int { return refCompare(a.Key, b.Key) })
	return Def{Kind: kind, Fields: fields}.Digest(), nil
}

var canonicalSeeds = []string{
	`{"b":1,"a":[true,null,"x"]}`, `  1.50e+3 `, `"<&>\u2028\n\u0001"`, `{"é":1,"z":2,"😀":3,"ｚ":4}`,
	`{"a":1,"a":2,"A":3}`, `{"a":{"x":1},"a":{"y":[1,{"k":"v","k":"w"}]}}`, `"\ud800\udc00 \ud800 \udc00 \ud800\u0041 \uDBFF\uDFFF"`,
	"\"\xff\xfe\xed\xa0\x80 \uFFFD\"", `[-0,1E+2,0.5e-1,12345678901234567890]`, `{"a":1} {}`, `{"a":`, ``, `[1,]`, `{"a\"b":"\/\b\f"}`,
}

// FuzzCanonicalJSON holds the scanner's canonical form to the reference's:
// the same bytes for every valid value, and an error for anything else.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range canonicalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := canonicalJSON(raw)
		if !json.Valid(raw) {
			// The reference took a valid value followed by garbage ("0A0")
			// for the value alone.
			if err == nil {
				t.Fatalf("canonicalJSON(%q) succeeded", raw)
			}
			return
		}
		want, werr := refcanonicalJSON(raw)
		if (err == nil) != (werr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("canonicalJSON(%q) = %q, %v; the reference %q, %v", raw, got, err, want, werr)
		}
	})
}

// FuzzDigest holds Digest and Canonical's digest, whole and partial, to
// the reference's for any definition, a tool's or a prompt's.
func FuzzDigest(f *testing.F) {
	for _, c := range goldenCases {
		f.Add(c.kind == Prompt, c.def)
	}
	for _, s := range canonicalSeeds {
		f.Add(false, `{"description":`+s+`,"inputSchema":`+s+`}`)
		f.Add(true, `{"arguments":`+s+`,"title":null,"title":`+s+`}`)
		f.Add(false, `{"_meta":`+s+`,"server":`+s+`,"~server":1,"name":"x","a b":`+s+`,"":null}`)
	}
	f.Fuzz(func(t *testing.T, prompt bool, def string) {
		kind := Tool
		if prompt {
			kind = Prompt
		}
		for _, form := range []struct {
			what      string
			digest    func(Kind, string, string, []byte) (Sum, error)
			canonical func(Kind, string, string, string, []byte) (Def, error)
			ref       func(Kind, string, string, []byte) (string, error)
		}{
			{"whole", Digest, Canonical, func(_ Kind, alias, child string, def []byte) (string, error) {
				return refWholeDigest(alias, child, def)
			}},
			{"partial", PartialDigest, CanonicalPartial, refPartialDigest},
		} {
			want, werr := form.ref(kind, "srv", "child \"x\"", []byte(def))
			sum, err := form.digest(kind, "srv", "child \"x\"", []byte(def))
			if (err == nil) != (werr == nil) || err == nil && sum.String() != want {
				t.Fatalf("%s: Digest(%q) = %s, %v; the reference %s, %v", form.what, def, sum, err, want, werr)
			}
			d, err := form.canonical(kind, "srv__child", "srv", "child \"x\"", []byte(def))
			if (err == nil) != (werr == nil) || err == nil && d.Digest() != want {
				t.Fatalf("%s: Canonical(%q).Digest() = %s, %v; the reference %s", form.what, def, d.Digest(), err, want)
			}
		}
	})
}
