package naming

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzURIs checks the URI scheme and the result rewriter on any input:
// SplitURI inverts ExposeURI for every valid alias and any URI, and
// anything SplitURI accepts is an exposed URI; RewriteURIs never panics,
// fails exactly on what json.Valid refuses, returns its input itself under
// an identity rewrite, and otherwise agrees with rewriting the fully
// decoded value.
func FuzzURIs(f *testing.F) {
	f.Add("fs", "file:///a b", []byte(`{"content":[{"type":"resource_link","uri":"file:///a"}]}`), uint8(ResultToolCall))
	f.Add("docs-2", "mcpmux://x/y", []byte(`{"messages":[{"role":"user","content":{"type":"resource","resource":{"uri":"x:\u002f"}}}]}`), uint8(ResultPromptGet))
	f.Add("a", "", []byte(`{"contents":[{"uri":"file:///a","text":"\"\\"}]}`), uint8(ResultResourceRead))
	f.Add("MCPMUX://fs/x", "?#", []byte(`{"resources":[{"uri":"a"},{"uri":1}]} `), uint8(ResultResourceList))
	f.Add("a--b", "\xff", []byte(`{"resourceTemplates":[{"uriTemplate":"file:///{path}"}]}`), uint8(ResultTemplateList))
	f.Add("x", "é", []byte(`{"uri":"test://static/resource/1"}`), uint8(ParamsResourceUpdated))
	f.Add("", "", []byte(`[[{"a":-1.5e3}],"\ud800",null]`), uint8(0))
	f.Add("", "", []byte(`{"content":[{"type":"resource_link","uri":"x"},]}`), uint8(0))

	f.Fuzz(func(t *testing.T, alias, uri string, raw []byte, kind uint8) {
		for _, a := range []string{alias, aliasFrom(alias)} {
			if !validAlias(a) {
				continue
			}
			if got, u, ok := SplitURI(ExposeURI(a, uri)); !ok || got != a || u != uri {
				t.Errorf("SplitURI(ExposeURI(%q, %q)) = %q, %q, %v", a, uri, got, u, ok)
			}
		}
		if a, u, ok := SplitURI(alias); ok && !strings.EqualFold(ExposeURI(a, u), alias) {
			t.Errorf("SplitURI(%q) = %q, %q, which ExposeURI makes %q", alias, a, u, ExposeURI(a, u))
		}

		k := ResultKind(kind % uint8(ParamsResourceUpdated+1))
		valid := json.Valid(raw)
		same, err := RewriteURIs(raw, k, func(u string) (string, bool) { return u, true })
		if (err == nil) != valid {
			t.Fatalf("json.Valid = %v but RewriteURIs error = %v for %q", valid, err, raw)
		}
		if !valid {
			return
		}
		if !sameBytes(same, raw) {
			t.Errorf("identity rewrite changed %q into %q", raw, same)
		}
		rewrite := func(u string) (string, bool) {
			if strings.HasPrefix(u, "https:") {
				return "", false
			}
			return ExposeURI("fs", u+uri), true
		}
		got, err := RewriteURIs(raw, k, rewrite)
		if err != nil {
			t.Fatalf("RewriteURIs: %v", err)
		}
		checkAgainstReference(t, raw, k, rewrite, got)
	})
}

// aliasFrom maps any string to a candidate alias over the alias alphabet,
// so that the fuzzer reaches valid aliases of every shape.
func aliasFrom(s string) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
	b := make([]byte, 0, min(len(s), 40))
	for i := 0; i < len(s) && i < 40; i++ {
		b = append(b, alphabet[int(s[i])%len(alphabet)])
	}
	return string(b)
}
