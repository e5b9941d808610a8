package edge

import "testing"

// readMsgID reads the id mcp-go keeps (any case, the last), and tells
// requests from notifications and the client's answers.
func TestReadMsgID(t *testing.T) {
	cases := []struct {
		msg     string
		kind    idKind
		id      string // the id's bytes, when at is set
		carried bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, idRequest, "1", false},
		{`{"jsonrpc":"2.0","id":"a","method":"ping"}`, idRequest, `"a"`, false},
		{`{"jsonrpc":"2.0","id":"\u0061","method":"ping"}`, idRequest, `"\u0061"`, true},
		{`{"jsonrpc":"2.0","id":-1,"method":"ping"}`, idRequest, "-1", true},
		{`{"jsonrpc":"2.0","ID":2.5,"method":"ping"}`, idRequest, "2.5", true},
		{`{"jsonrpc":"2.0","id":1,"Id":{},"method":"ping"}`, idBadType, `{}`, false},
		{`{"jsonrpc":"2.0","id":[],"method":"ping"}`, idBadType, `[]`, false},
		{`{"jsonrpc":"2.0","id":false}`, idBadType, `false`, false},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call"}`, idNull, `null`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","id":null}`, idNull, `null`, false},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled"}`, idPass, "", false},
		{`{"jsonrpc":"2.0","id":null,"method":"notifications\/initialized"}`, idPass, "", false},
		{`{"jsonrpc":"2.0","id":null}`, idPass, "", false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, idPass, "", false},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, idPass, "3", false},
		{`{"jsonrpc":"2.0","id":{},"result":{}}`, idPass, "", false},
		{`{"jsonrpc":"2.0","id":-3,"error":{"code":1,"message":"m"}}`, idPass, "-3", true},
		{`{"jsonrpc":"2.0","id":{},"error":null}`, idBadType, `{}`, false},
		{`{"jsonrpc":"2.0","id":6,"result":{},"Result":null}`, idRequest, "6", false},
		{`not json`, idPass, "", false},
		{`[{"id":{},"method":"ping"}]`, idPass, "", false},
	}
	for _, c := range cases {
		v := readMsgID([]byte(c.msg))
		id := ""
		if v.at.End > 0 {
			id = c.msg[v.at.Start:v.at.End]
		}
		if v.kind != c.kind || id != c.id || v.carried != c.carried {
			t.Errorf("readMsgID(%s) = kind %d, id %s, carried %v; want %d, %s, %v", c.msg, v.kind, id, v.carried, c.kind, c.id, c.carried)
		}
	}
}
