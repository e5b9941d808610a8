package frame

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRead(t *testing.T) {
	cases := []struct {
		msg     string
		kind    Kind
		id      string
		method  string
		refused string // the refusal's message, if any
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`, Request, "1", "tools/call", ""},
		{`{"jsonrpc":"2.0","id":"x\u00e9","method":"ping"}`, Request, `"x\u00e9"`, "ping", ""},
		{`{"jsonrpc":"2.0","id":-1.5e3,"method":"ping"}`, Request, "-1.5e3", "ping", ""},
		{` {"method":"to\u006fls/list","id":12345678901234567890123,"jsonrpc":"2.0"} `, Request, "12345678901234567890123", "tools/list", ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, Notification, "", "notifications/initialized", ""},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled","params":{"requestId":1}}`, Notification, "", "notifications/cancelled", ""},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, Response, "7", "", ""},
		{`{"jsonrpc":"2.0","id":"m-1","error":{"code":1,"message":"no"}}`, Response, `"m-1"`, "", ""},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, Other, "", "", NullIDText},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, Other, "", "", BadIDText},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, Other, "", "", BadIDText},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, Other, "", "", BadIDText},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call"}`, Other, "", "", `invalid request: the member "Method" is "method" in another case`},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, Request, "", "", `invalid request: the member "method" is given twice`},
		{`{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}`, Request, "", "", `invalid request: the member "id" is given twice`},
		{`{"jsonrpc":"2.0","Params":{},"method":"notifications/initialized"}`, Notification, "", "", `invalid request: the member "Params" is "params" in another case`},
		{`{"jsonrpc":"1.0","id":5,"method":"ping"}`, Other, "", "", ""},
		{`{"id":5,"method":"ping"}`, Other, "", "", ""},
		{`{"jsonrpc":"2.0","id":5,"method":3}`, Other, "", "", ""},
		{`{"jsonrpc":"2.0","id":5}`, Other, "", "", ""},
		{`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, Other, "", "", ""},
		{`{"jsonrpc":"2.0","id":5,"method":"ping"} x`, Other, "", "", ""},
		{`42`, Other, "", "", ""},
		{``, Other, "", "", ""},
	}
	for _, c := range cases {
		f := Read([]byte(c.msg))
		refused := ""
		if f.Refused != nil {
			refused = f.Refused.Message
		}
		if f.Kind != c.kind || string(f.ID) != c.id || f.Method != c.method || refused != c.refused {
			t.Errorf("Read(%s) = kind %d id %q method %q refused %q; want %d %q %q %q",
				c.msg, f.Kind, f.ID, f.Method, refused, c.kind, c.id, c.method, c.refused)
		}
	}
}

// What Read reads of a message it acts on is what encoding/json decodes:
// the method, and the id as a value.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":"\u0041","method":"p\"ing"}`,
		`{"jsonrpc":"2.0","method":"notifications/x","id":null}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		fr := Read(msg)
		if fr.Refused != nil || fr.Kind == Other {
			return
		}
		var d struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(msg, &d); err != nil {
			if len(fr.ID) > 0 && fr.ID[0] != '"' { // a number too large for what mcp-go decodes it into is no error here
				return
			}
			t.Fatalf("Read took %q for kind %d; encoding/json: %v", msg, fr.Kind, err)
		}
		if d.JSONRPC != "2.0" || d.Method != fr.Method {
			t.Fatalf("%q: method %q, encoding/json %q", msg, fr.Method, d.Method)
		}
		if fr.Kind != Notification {
			var a, b any
			_ = json.Unmarshal(fr.ID, &a)
			_ = json.Unmarshal(d.ID, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%q: id %s, encoding/json %s", msg, fr.ID, d.ID)
			}
		}
	})
}

func TestReadParams(t *testing.T) {
	cases := []struct {
		params string
		want   Params
		err    string
	}{
		{`{"name":"docs__search","arguments":{"q":1},"_meta":{"progressToken":1}}`,
			Params{Name: "docs__search", Arguments: []byte(`{"q":1}`), Meta: []byte(`{"progressToken":1}`)}, ""},
		{`{"name":"a","arguments":null,"_meta":null}`, Params{Name: "a"}, ""},
		{`{"uri":"file:///a","extra":[1]}`, Params{URI: "file:///a"}, ""},
		{`["a"]`, Params{}, "invalid params of tools/call: they must be a JSON object"},
		{`{"name":3}`, Params{}, "invalid params of tools/call: name must be a string"},
		{`{"name":"a","Name":"b"}`, Params{}, `invalid params of tools/call: the member "Name" is "name" in another case`},
		{`{"name":"a","name":"b"}`, Params{}, `invalid params of tools/call: the member "name" is given twice`},
		{`{"name":"a","_meta":[]}`, Params{}, "invalid params of tools/call: _meta must be a JSON object"},
	}
	for _, c := range cases {
		p, err := ReadParams("tools/call", []byte(c.params))
		msg := ""
		if err != nil {
			msg = err.Message
		}
		if msg != c.err || err == nil && !reflect.DeepEqual(p, c.want) {
			t.Errorf("ReadParams(%s) = %+v, %q; want %+v, %q", c.params, p, msg, c.want, c.err)
		}
	}
}

func TestForChild(t *testing.T) {
	cases := []struct {
		meta, token, want string
	}{
		{`{"progressToken":"p","com.example/k":{"a":1},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`,
			`"mcpmux-7"`, `{"com.example/k":{"a":1},"progressToken":"mcpmux-7"}`},
		{`{"progressToken":1}`, `"mcpmux-1"`, `{"progressToken":"mcpmux-1"}`},
		{`{"x":1}`, `"mcpmux-1"`, `{"x":1}`},
		{`{"io.modelcontextprotocol/logLevel":"debug"}`, `"mcpmux-1"`, ``},
		{`{}`, `"mcpmux-1"`, ``},
	}
	for _, c := range cases {
		m, err := ReadMeta([]byte(c.meta))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(m.ForChild([]byte(c.token))); got != c.want {
			t.Errorf("ForChild of %s = %s, want %s", c.meta, got, c.want)
		}
	}
}

func TestAnswers(t *testing.T) {
	if got := string(Result([]byte(`"a\u00e9"`), []byte(`{"content":[]}`))); got != `{"jsonrpc":"2.0","id":"a\u00e9","result":{"content":[]}}`+"\n" {
		t.Errorf("Result = %s", got)
	}
	e := &Error{Code: -32002, Message: "Resource not found", Data: json.RawMessage(`{"uri":"x"}`)}
	if got := string(ErrorAnswer(nil, e)); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"x"}}}`+"\n" {
		t.Errorf("ErrorAnswer = %s", got)
	}
	d := Decoration{}
	for _, c := range []struct{ in, method, want string }{
		{`{"content":[]}`, "tools/call", `{"content":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"","version":""}}}`},
		{`{}`, "tools/list", `{"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"","version":""}}}`},
		{`{"_meta":{"k":1},"resultType":"input_required"}`, "tools/call", `{"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"","version":""}},"resultType":"input_required"}`},
		{`{"_meta":{}}`, "prompts/get", `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"","version":""}},"resultType":"complete"}`},
		{`{"_meta":null}`, "prompts/get", `{"_meta":null,"resultType":"complete"}`},
		{`[1]`, "prompts/get", `[1]`},
	} {
		if got := string(d.Decorate([]byte(c.in), c.method)); got != c.want {
			t.Errorf("Decorate(%s, %s) = %s, want %s", c.in, c.method, got, c.want)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"main__echo","arguments":{"text":"hello"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		f := Read(msg)
		if _, err := ReadParams(f.Method, f.Params); err != nil {
			b.Fatal(err)
		}
	}
}
