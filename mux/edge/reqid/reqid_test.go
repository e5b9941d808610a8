package reqid

import (
	"strings"
	"testing"
)

// Read reads the id mcp-go keeps (any case, the last), and tells
// requests from notifications and the client's answers.
func TestRead(t *testing.T) {
	cases := []struct {
		msg     string
		kind    Kind
		id      string // the id's bytes, when at is set
		carried bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, Request, "1", false},
		{`{"jsonrpc":"2.0","id":"a","method":"ping"}`, Request, `"a"`, false},
		{`{"jsonrpc":"2.0","id":"\u0061","method":"ping"}`, Request, `"\u0061"`, true},
		{`{"jsonrpc":"2.0","id":-1,"method":"ping"}`, Request, "-1", true},
		{`{"jsonrpc":"2.0","ID":2.5,"method":"ping"}`, Request, "2.5", true},
		{`{"jsonrpc":"2.0","id":1,"Id":{},"method":"ping"}`, BadType, `{}`, false},
		{`{"jsonrpc":"2.0","id":[],"method":"ping"}`, BadType, `[]`, false},
		{`{"jsonrpc":"2.0","id":false}`, BadType, `false`, false},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`, Null, `null`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","id":null}`, Null, `null`, false},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled"}`, Pass, "", false},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications\/initialized"}`, Pass, "", false},
		{`{"jsonrpc":"2.0","id":null}`, Pass, "", false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, Pass, "", false},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, Pass, "3", false},
		{`{"jsonrpc":"2.0","id":{},"result":{}}`, Pass, "", false},
		{`{"jsonrpc":"2.0","id":-3,"error":{"code":1,"message":"m"}}`, Pass, "-3", true},
		{`{"jsonrpc":"2.0","id":{},"error":null}`, BadType, `{}`, false},
		{`{"jsonrpc":"2.0","id":6,"result":{},"Result":null}`, Request, "6", false},
		{`not json`, Pass, "", false},
		{`[{"id":{},"method":"ping"}]`, Pass, "", false},
	}
	for _, c := range cases {
		v := Read([]byte(c.msg))
		id := ""
		if v.At.End > 0 {
			id = c.msg[v.At.Start:v.At.End]
		}
		if v.Kind != c.kind || id != c.id || v.Carried != c.carried {
			t.Errorf("Read(%s) = kind %d, id %s, carried %v; want %d, %s, %v", c.msg, v.Kind, id, v.Carried, c.kind, c.id, c.carried)
		}
	}
}

// RequestID never decodes a message's result: its work is checking, not
// building values, however large the result.
func TestRequestIDDoesNotDecodeResult(t *testing.T) {
	line := []byte(`{"jsonrpc":"1.0","id":1,"result":[` + strings.Repeat(`{"k":"v","n":1.5e3},`, 100000) + `0]}`)
	if _, ok := RequestID(line); !ok {
		t.Fatal("a message in another version, with an id, is answered under it")
	}
	if n := testing.AllocsPerRun(5, func() { RequestID(line) }); n > 20 {
		t.Errorf("RequestID made %.0f allocations for a result of 100,000 objects", n)
	}
}
