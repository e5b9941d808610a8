package naming

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/yosida95/uritemplate/v3"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

func TestExposeURIRoundTrips(t *testing.T) {
	tests := []struct{ alias, uri, exposed string }{
		{"fs", "file:///a b", "mcpmux://fs/file:///a b"},
		{"docs-2", "https://example.com/x?q=1&r=a b#frag", "mcpmux://docs-2/https://example.com/x?q=1&r=a b#frag"},
		{"a", "", "mcpmux://a/"},
		{"a", "/", "mcpmux://a//"},
		{"x9", "mcpmux://other/file:///y", "mcpmux://x9/mcpmux://other/file:///y"},
		{"fs", "file:///données/日本.txt", "mcpmux://fs/file:///données/日本.txt"},
		{"fs", "not a uri at all \" \\ \x00", "mcpmux://fs/not a uri at all \" \\ \x00"},
		{strings.Repeat("a", 32), "u:v", "mcpmux://" + strings.Repeat("a", 32) + "/u:v"},
	}
	for _, tt := range tests {
		got := ExposeURI(tt.alias, tt.uri)
		if got != tt.exposed {
			t.Errorf("ExposeURI(%q, %q) = %q, want %q", tt.alias, tt.uri, got, tt.exposed)
		}
		alias, uri, ok := SplitURI(got)
		if !ok || alias != tt.alias || uri != tt.uri {
			t.Errorf("SplitURI(%q) = %q, %q, %v; want %q, %q, true", got, alias, uri, ok, tt.alias, tt.uri)
		}
	}
}

func TestSplitURI(t *testing.T) {
	tests := []struct {
		exposed, alias, uri string
		ok                  bool
	}{
		{"MCPMUX://fs/file:///x", "fs", "file:///x", true}, // schemes are case-insensitive
		{"McpMux://fs/", "fs", "", true},
		{"mcpmux://a-b-c/x", "a-b-c", "x", true},
		{"", "", "", false},
		{"mcpmux:", "", "", false},
		{"mcpmux://", "", "", false},
		{"mcpmux:///file:///x", "", "", false}, // empty alias
		{"mcpmux://fs", "", "", false},         // no '/' after the alias
		{"mcpmux://FS/x", "", "", false},
		{"mcpmux://my_docs/x", "", "", false},
		{"mcpmux://-fs/x", "", "", false},
		{"mcpmux://fs-/x", "", "", false},
		{"mcpmux://a--b/x", "", "", false},
		{"mcpmux://a b/x", "", "", false},
		{"mcpmux://fs:80/x", "", "", false},
		{"mcpmux://" + strings.Repeat("a", 33) + "/x", "", "", false},
		{"mcpmux:/fs/x", "", "", false},
		{"file:///x", "", "", false},
		{"xmcpmux://fs/x", "", "", false},
	}
	for _, tt := range tests {
		alias, uri, ok := SplitURI(tt.exposed)
		if alias != tt.alias || uri != tt.uri || ok != tt.ok {
			t.Errorf("SplitURI(%q) = %q, %q, %v; want %q, %q, %v", tt.exposed, alias, uri, ok, tt.alias, tt.uri, tt.ok)
		}
	}
}

// templateValues are the variable sets every template below is expanded
// with: reserved characters, spaces, unicode, empty values, lists and
// key-value pairs, and missing variables.
var templateValues = []uritemplate.Values{
	{},
	{"path": uritemplate.String("a.txt"), "table": uritemplate.String("users"), "id": uritemplate.String("7")},
	{"path": uritemplate.String("dir/sub dir/ä?.txt"), "frag": uritemplate.String("sec 2/#x")},
	{"path": uritemplate.String(""), "table": uritemplate.String(""), "id": uritemplate.String(""), "q": uritemplate.String(""), "frag": uritemplate.String("")},
	{"table": uritemplate.String("a/b"), "id": uritemplate.String("1,2"), "q": uritemplate.String("x y&z=1"), "limit": uritemplate.String("10")},
	{"path": uritemplate.List("a", "b/c"), "q": uritemplate.List("1", "2"), "frag": uritemplate.KV("k", "v w", "k2", "")},
	{"path": uritemplate.String("mcpmux://other/x"), "id": uritemplate.String("日本"), "limit": uritemplate.KV("a", "1")},
}

var childTemplates = []string{
	"file:///{path}",
	"file:///{+path}",
	"db://{table}/{id}{?q,limit}",
	"res://x/{#frag}",
	"{+path}",
	"{/path*}{;id}{&q}",
	"mcpmux://inner/{.table}",
}

// TestExposeTemplate proves the template property: an exposed template
// is a valid RFC 6570 template with the same variables, and its expansion
// with any values is ExposeURI(alias, the child's expansion), which the
// exposed template matches and SplitURI routes back.
func TestExposeTemplate(t *testing.T) {
	for _, alias := range []string{"fs", "db-2"} {
		for _, raw := range childTemplates {
			child, err := uritemplate.New(raw)
			if err != nil {
				t.Fatalf("child template %q: %v", raw, err)
			}
			exposed, err := uritemplate.New(ExposeTemplate(alias, raw))
			if err != nil {
				t.Errorf("ExposeTemplate(%q, %q) = %q is not a valid template: %v", alias, raw, ExposeTemplate(alias, raw), err)
				continue
			}
			if !reflect.DeepEqual(exposed.Varnames(), child.Varnames()) {
				t.Errorf("%q: exposed variables %v, child's %v", raw, exposed.Varnames(), child.Varnames())
			}
			matcher, err := CompileTemplate(ExposeTemplate(alias, raw))
			if err != nil {
				t.Fatalf("CompileTemplate: %v", err)
			}
			for _, v := range templateValues {
				want, err := child.Expand(v)
				if err != nil {
					t.Fatalf("%q.Expand(%v): %v", raw, v, err)
				}
				got, err := exposed.Expand(v)
				if err != nil {
					t.Fatalf("exposed %q.Expand(%v): %v", raw, v, err)
				}
				if got != ExposeURI(alias, want) {
					t.Errorf("%q with %v: exposed expansion %q, want %q", raw, v, got, ExposeURI(alias, want))
				}
				if !matcher.Match(got) {
					t.Errorf("exposed %q does not match its own expansion %q", matcher, got)
				}
				if a, u, ok := SplitURI(got); !ok || a != alias || u != want {
					t.Errorf("SplitURI(%q) = %q, %q, %v; want %q, %q", got, a, u, ok, alias, want)
				}
			}
		}
	}
}

// TestExposeTemplateInvalid: a template the child got wrong stays wrong,
// so the exposed one is refused the same way.
func TestExposeTemplateInvalid(t *testing.T) {
	for _, raw := range []string{"file:///{path", "{a b}", "x/{=a}", "a\x00", "{a:0}", "%zz", "{}"} {
		if _, err := uritemplate.New(raw); err == nil {
			t.Fatalf("%q parses; the test wants an invalid one", raw)
		}
		if _, err := CompileTemplate(ExposeTemplate("fs", raw)); err == nil {
			t.Errorf("exposed %q compiles, but the child's template is invalid", raw)
		}
	}
}

func TestTemplateMatch(t *testing.T) {
	tests := []struct {
		tmpl, uri string
		want      bool
	}{
		{"file:///{path}", "file:///a.txt", true},
		{"file:///{path}", "file:///a%20b.txt", true},
		{"file:///{path}", "file:///a/b.txt", false}, // {path} does not take '/'
		{"file:///{path}", "file:///", true},
		{"file:///{path}", "https:///a.txt", false},
		{"file:///{+path}", "file:///a/b.txt", true},
		{"file:///{+path}", "file:///a/b?c#d", true},
		{"db://{table}/{id}{?q,limit}", "db://users/7", true},
		{"db://{table}/{id}{?q,limit}", "db://users/7?q=x&limit=3", true},
		{"db://{table}/{id}{?q,limit}", "db://users/7#x", false},
		{"db://{table}/{id}{?q,limit}", "db://users", false},
		{"res://x/{#frag}", "res://x/#a/b", true},
		{"res://x/{#frag}", "res://x/", true},
		{"res://x/{#frag}", "res://y/#a", false},
		{"mcpmux://fs/file:///{path}", "mcpmux://fs/file:///a.txt", true},
		{"mcpmux://fs/file:///{path}", "file:///a.txt", false},
		{"test://static/resource/{id}", "test://static/resource/12", true},
		{"test://static/resource/{id}", "test://static/resource/12\n", false},
	}
	for _, tt := range tests {
		tmpl, err := CompileTemplate(tt.tmpl)
		if err != nil {
			t.Fatalf("CompileTemplate(%q): %v", tt.tmpl, err)
		}
		if got := tmpl.Match(tt.uri); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.tmpl, tt.uri, got, tt.want)
		}
		if tmpl.String() != tt.tmpl {
			t.Errorf("String() = %q, want %q", tmpl.String(), tt.tmpl)
		}
	}
}

// TestCompileTemplateTooComplex: uritemplate panics building the matcher
// of a template Go's regexp refuses; CompileTemplate reports an error.
func TestCompileTemplateTooComplex(t *testing.T) {
	raw := "x:{" + strings.Repeat("a,", 1001) + "a}"
	if _, err := uritemplate.New(raw); err != nil {
		t.Fatalf("%q does not even parse: %v", raw[:20], err)
	}
	if _, err := CompileTemplate(raw); err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Errorf("CompileTemplate of 1002 variables in one expression: %v, want a too-complex error", err)
	}
}

// prefixFS is the rewrite of a prefixed child "fs" that owns every URI
// except https: ones.
func prefixFS(uri string) (string, bool) {
	if strings.HasPrefix(uri, "https:") {
		return "", false
	}
	return ExposeURI("fs", uri), true
}

func TestRewriteURIs(t *testing.T) {
	tests := []struct {
		name string
		kind ResultKind
		in   string
		want string // "" when in comes back itself
	}{
		{
			name: "tool text only",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"text","text":"see file:///a \u00e9 \"q\""}],"isError":false,"n":1.50E+3}`,
		},
		{
			name: "tool resource link, type after uri, unknown fields and spacing kept",
			kind: ResultToolCall,
			in: "{ \"x-first\" : [1, {\"uri\":\"file:///no\"}],\n\t\"content\" : [ {\"uri\" : \"file:///a.txt\", \"name\":\"a\",\n" +
				"  \"type\":\"resource_link\", \"annotations\":{\"x-k\":{}}, \"n\": -0.0e-0 } ],\"structuredContent\":{\"uri\":\"file:///s\"} }",
			want: "{ \"x-first\" : [1, {\"uri\":\"file:///no\"}],\n\t\"content\" : [ {\"uri\" : \"mcpmux://fs/file:///a.txt\", \"name\":\"a\",\n" +
				"  \"type\":\"resource_link\", \"annotations\":{\"x-k\":{}}, \"n\": -0.0e-0 } ],\"structuredContent\":{\"uri\":\"file:///s\"} }",
		},
		{
			name: "tool embedded resource among other items",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"text","text":"t","uri":"file:///not-a-link"},{"type":"resource","resource":{"uri":"file:///b","mimeType":"text/plain","text":"{\"uri\":\"file:///inner\"}","_meta":{"k":1e400}}},{"type":"image","data":"AA==","uri":"file:///img"}],"_meta":{"content":[{"type":"resource_link","uri":"file:///meta"}]}}`,
			want: `{"content":[{"type":"text","text":"t","uri":"file:///not-a-link"},{"type":"resource","resource":{"uri":"mcpmux://fs/file:///b","mimeType":"text/plain","text":"{\"uri\":\"file:///inner\"}","_meta":{"k":1e400}}},{"type":"image","data":"AA==","uri":"file:///img"}],"_meta":{"content":[{"type":"resource_link","uri":"file:///meta"}]}}`,
		},
		{
			name: "escapes in the uri are decoded for rewrite and the result re-encoded",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"resource_link","uri":"file:\u002f\u002f/a\"b\\c\u00e9\ud83d\ude00"}]}`,
			want: `{"content":[{"type":"resource_link","uri":"mcpmux://fs/file:///a\"b\\cé😀"}]}`,
		},
		{
			name: "escaped keys and type are decoded",
			kind: ResultToolCall,
			in:   `{"cont\u0065nt":[{"\u0074ype":"resource\u005flink","\u0075ri":"x:y"}]}`,
			want: `{"cont\u0065nt":[{"\u0074ype":"resource\u005flink","\u0075ri":"mcpmux://fs/x:y"}]}`,
		},
		{
			name: "query, fragment, spaces, unicode and HTML characters keep their spelling",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"resource_link","uri":"file:///a b/é?x=<1>&y#frag"}]}`,
			want: `{"content":[{"type":"resource_link","uri":"mcpmux://fs/file:///a b/é?x=<1>&y#frag"}]}`,
		},
		{
			name: "a child URI that is itself an mcpmux URI",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"resource_link","uri":"mcpmux://other/file:///x"}]}`,
			want: `{"content":[{"type":"resource_link","uri":"mcpmux://fs/mcpmux://other/file:///x"}]}`,
		},
		{
			name: "a URI the rewrite declines stays",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"resource_link","uri":"https://example.com/"}]}`,
		},
		{
			name: "the wrong shapes are left alone",
			kind: ResultToolCall,
			in:   `{"content":[{"type":"resource","resource":"file:///x"},{"type":"resource_link","uri":7},{"type":7,"uri":"file:///y"},{"type":"resource_link"},"str",null,[{"type":"resource_link","uri":"file:///z"}]]}`,
		},
		{
			name: "content that is not an array",
			kind: ResultToolCall,
			in:   `{"content":{"type":"resource_link","uri":"file:///x"}}`,
		},
		{
			name: "not an object at all",
			kind: ResultToolCall,
			in:   `[{"content":[{"type":"resource_link","uri":"file:///x"}]}]`,
		},
		{
			name: "prompt messages",
			kind: ResultPromptGet,
			in:   ` {"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"file:///p","text":"x"}}},{"role":"user","content":[{"type":"resource_link","uri":"file:///q"}]}]} `,
			want: ` {"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi"}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"mcpmux://fs/file:///p","text":"x"}}},{"role":"user","content":[{"type":"resource_link","uri":"mcpmux://fs/file:///q"}]}]} `,
		},
		{
			name: "prompt content at the top is not a message",
			kind: ResultPromptGet,
			in:   `{"content":[{"type":"resource_link","uri":"file:///x"}]}`,
		},
		{
			name: "resources/read contents",
			kind: ResultResourceRead,
			in:   `{"contents":[{"uri":"file:///a","text":"x"},{"blob":"AA==","uri":"file:///b","mimeType":"application/octet-stream"},{"uri":"https://x/"}],"_meta":{"x":true}}`,
			want: `{"contents":[{"uri":"mcpmux://fs/file:///a","text":"x"},{"blob":"AA==","uri":"mcpmux://fs/file:///b","mimeType":"application/octet-stream"},{"uri":"https://x/"}],"_meta":{"x":true}}`,
		},
		{
			name: "resources/list",
			kind: ResultResourceList,
			in:   `{"resources":[{"uri":"test://static/resource/1","name":"Resource 1","annotations":{"audience":["user"],"x":null}}],"nextCursor":"abc"}`,
			want: `{"resources":[{"uri":"mcpmux://fs/test://static/resource/1","name":"Resource 1","annotations":{"audience":["user"],"x":null}}],"nextCursor":"abc"}`,
		},
		{
			name: "resources/list has no content items",
			kind: ResultResourceList,
			in:   `{"content":[{"type":"resource_link","uri":"file:///x"}],"resources":[]}`,
		},
		{
			name: "resources/templates/list",
			kind: ResultTemplateList,
			in:   `{"resourceTemplates":[{"uriTemplate":"test://static/resource/{id}","name":"t"},{"name":"u","uriTemplate":"file:///{+path}"}]}`,
			want: `{"resourceTemplates":[{"uriTemplate":"mcpmux://fs/test://static/resource/{id}","name":"t"},{"name":"u","uriTemplate":"mcpmux://fs/file:///{+path}"}]}`,
		},
		{
			name: "notifications/resources/updated",
			kind: ParamsResourceUpdated,
			in:   `{"uri":"test://static/resource/3","_meta":{"uri":"no"}}`,
			want: `{"uri":"mcpmux://fs/test://static/resource/3","_meta":{"uri":"no"}}`,
		},
		{
			name: "empty containers and every literal",
			kind: ResultResourceRead,
			in:   `{"contents":[],"a":{},"b":[true,false,null,0,-1,2.5,1e-7,"",{}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := json.RawMessage(tt.in)
			if !json.Valid(in) {
				t.Fatalf("test input is not JSON")
			}
			got, err := RewriteURIs(in, tt.kind, prefixFS)
			if err != nil {
				t.Fatalf("RewriteURIs: %v", err)
			}
			if tt.want == "" {
				if !sameBytes(got, in) {
					t.Errorf("nothing to rewrite, but got a different value:\n%s", got)
				}
			} else if string(got) != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			checkAgainstReference(t, in, tt.kind, prefixFS, got)

			same, err := RewriteURIs(in, tt.kind, func(u string) (string, bool) { return u, true })
			if err != nil || !sameBytes(same, in) {
				t.Errorf("identity rewrite: %v, %s", err, same)
			}
		})
	}
}

// sameBytes reports whether a is b itself, not a copy.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// checkAgainstReference compares got, RewriteURIs' answer for in, with
// what decoding in fully and rewriting the decoded value gives.
func checkAgainstReference(t *testing.T, in []byte, kind ResultKind, rewrite func(string) (string, bool), got []byte) {
	t.Helper()
	want, err := decodeJSON(in)
	if err != nil {
		t.Fatalf("decoding the input: %v", err)
	}
	referenceRewrite(want, kind, rewrite)
	// Through JSON once more, so that invalid UTF-8 a rewrite returned
	// reads as encoding/json (and the scanner) writes it.
	enc, err := json.Marshal(want)
	if err != nil {
		t.Fatalf("encoding the reference: %v", err)
	}
	if want, err = decodeJSON(enc); err != nil {
		t.Fatalf("decoding the reference: %v", err)
	}
	have, err := decodeJSON(got)
	if err != nil {
		t.Fatalf("RewriteURIs produced invalid JSON %q: %v", got, err)
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf("RewriteURIs disagrees with the decoded reference:\n got %#v\nwant %#v", have, want)
	}
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// referenceRewrite is RewriteURIs on a decoded value: slow, obvious, and
// the definition the scanner is held to.
func referenceRewrite(v any, kind ResultKind, rewrite func(string) (string, bool)) {
	field := func(m map[string]any, key string) {
		if s, ok := m[key].(string); ok {
			if r, ok := rewrite(s); ok {
				m[key] = r
			}
		}
	}
	item := func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		switch m["type"] {
		case "resource_link":
			field(m, "uri")
		case "resource":
			if res, ok := m["resource"].(map[string]any); ok {
				field(res, "uri")
			}
		}
	}
	each := func(v any, f func(any)) {
		if list, ok := v.([]any); ok {
			for _, e := range list {
				f(e)
			}
		}
	}
	top, ok := v.(map[string]any)
	if !ok {
		return
	}
	switch kind {
	case ResultToolCall:
		each(top["content"], item)
	case ResultPromptGet:
		each(top["messages"], func(msg any) {
			if m, ok := msg.(map[string]any); ok {
				if _, isList := m["content"].([]any); isList {
					each(m["content"], item)
				} else {
					item(m["content"])
				}
			}
		})
	case ResultResourceRead, ResultResourceList, ResultTemplateList:
		list, key := map[ResultKind]string{ResultResourceRead: "contents", ResultResourceList: "resources", ResultTemplateList: "resourceTemplates"}[kind], "uri"
		if kind == ResultTemplateList {
			key = "uriTemplate"
		}
		each(top[list], func(e any) {
			if m, ok := e.(map[string]any); ok {
				field(m, key)
			}
		})
	case ParamsResourceUpdated:
		field(top, "uri")
	}
}

func TestRewriteURIsMalformed(t *testing.T) {
	inputs := []string{
		"",
		" ",
		"{",
		"}",
		`{"content":[}`,
		`{"content":[{"type":"resource_link","uri":"x"]}`,
		`{"content":[{"type":"resource_link","uri":"x"}],}`,
		`{"content":[{"type":"resource_link","uri":"x"},]}`,
		`{"a":1,}`,
		`{"a" 1}`,
		`{"a":}`,
		`{a:1}`,
		`{"a":1}{}`,
		`{"a":1} x`,
		`{"uri":"x"`,
		`{"uri":"x}`,
		"\"\x01\"",
		"{\"uri\":\"a\nb\"}",
		`"\q"`,
		`"\u12"`,
		`"\u12G4"`,
		`"\`,
		`"abc\"`,
		"01",
		"1.",
		"1e",
		"1e+",
		"-",
		"+1",
		".5",
		"tru",
		"nul",
		"True",
		"NaN",
		"[1 2]",
		"\xef\xbb\xbf{}", // a byte-order mark is not JSON
		strings.Repeat("[", jsonwire.MaxDepth+1) + strings.Repeat("]", jsonwire.MaxDepth+1),
		`{"content":` + strings.Repeat("[", jsonwire.MaxDepth) + strings.Repeat("]", jsonwire.MaxDepth) + `}`,
	}
	for _, in := range inputs {
		if json.Valid([]byte(in)) {
			t.Fatalf("%q is valid JSON; the test wants malformed input", in)
		}
		for kind := ResultToolCall; kind <= ParamsResourceUpdated; kind++ {
			got, err := RewriteURIs(json.RawMessage(in), kind, prefixFS)
			if !errors.Is(err, ErrBadJSON) || got != nil {
				t.Errorf("kind %d, %.40q: got %q, %v; want an ErrBadJSON error", kind, in, got, err)
			}
		}
	}
}

// TestRewriteURIsDepth: nesting up to encoding/json's limit is accepted,
// on the walked path and inside skipped values alike.
func TestRewriteURIsDepth(t *testing.T) {
	deep := strings.Repeat("[", jsonwire.MaxDepth) + strings.Repeat("]", jsonwire.MaxDepth)
	inner := strings.Repeat("[", jsonwire.MaxDepth-1) + strings.Repeat("]", jsonwire.MaxDepth-1)
	for _, in := range []string{deep, `{"content":` + inner + `}`, `{"x":` + inner + `}`} {
		if !json.Valid([]byte(in)) {
			t.Fatalf("json.Valid refuses %.20q", in)
		}
		if _, err := RewriteURIs(json.RawMessage(in), ResultToolCall, prefixFS); err != nil {
			t.Errorf("%.20q...: %v", in, err)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `"quoted" \back\`, "tab\tnl\ncr\r\x00\x1f\x7f", "<a&b>", "é日本😀", "\u2028\u2029", "bad \xff utf8 \xe2\x82"} {
		enc := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: %v", s, enc, err)
		}
		std, _ := json.Marshal(s)
		var stdBack string
		_ = json.Unmarshal(std, &stdBack)
		if back != stdBack {
			t.Errorf("appendJSONString(%q) decodes to %q; encoding/json's to %q", s, back, stdBack)
		}
		if strings.ContainsAny(s, "<>&") && !bytes.ContainsAny(enc, "<>&") {
			t.Errorf("appendJSONString(%q) = %s escaped HTML characters", s, enc)
		}
	}
}

// benchResult is a tools/call result with 256 KiB of text (with the
// quotes, newlines and unicode a real text has) and links resource links.
func benchResult(links int) []byte {
	var text strings.Builder
	for i := 0; text.Len() < 256<<10; i++ {
		fmt.Fprintf(&text, "line %d: the \"quick\" brown fox — jumps over file:///tmp/x.txt\\n\n", i)
	}
	body, _ := json.Marshal(text.String())
	var b bytes.Buffer
	b.WriteString(`{"content":[{"type":"text","text":`)
	b.Write(body)
	b.WriteString(`}`)
	for i := range links {
		fmt.Fprintf(&b, `,{"type":"resource_link","uri":"file:///data/report-%d.txt","name":"report %d","mimeType":"text/plain"}`, i, i)
	}
	b.WriteString(`],"structuredContent":{"lines":12345},"isError":false}`)
	return b.Bytes()
}

func BenchmarkRewriteURIs(b *testing.B) {
	for _, links := range []int{0, 50} {
		raw := benchResult(links)
		b.Run(fmt.Sprintf("links=%d", links), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := RewriteURIs(raw, ResultToolCall, prefixFS); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// For scale: one validating pass of encoding/json over the same bytes.
	raw := benchResult(0)
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if !json.Valid(raw) {
				b.Fatal("invalid")
			}
		}
	})
}
