package tasks

import "testing"

// A task-augmented call_tool handed to mcp-go as the direct call it stands
// for keeps every byte but its name and arguments: the id, the task, the
// _meta; arguments not given stay absent.
func TestDirectCall(t *testing.T) {
	for _, c := range []struct{ msg, tool, args, want string }{
		{`{"jsonrpc":"2.0","id":"a\u0041","method":"tools/call","params":{"name":"mcpmux__call_tool","arguments":{"name":"jobs__run","arguments":{"n":1}},"task":{"ttl":5},"_meta":{"progressToken":7}}}`,
			"jobs__run", `{"n":1}`,
			`{"jsonrpc":"2.0","id":"a\u0041","method":"tools/call","params":{"name":"jobs__run","arguments":{"n":1},"task":{"ttl":5},"_meta":{"progressToken":7}}}`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{},"name":"mcpmux__call_tool","arguments":{"name":"jobs__run"}}}`,
			"jobs__run", "",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"task":{},"name":"jobs__run"}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"mcpmux__call_tool","arguments":{"name":"jobs__run","arguments":null},"task":{}}}`,
			"jobs__run", "null",
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"jobs__run","arguments":null,"task":{}}}`},
	} {
		var args []byte
		if c.args != "" {
			args = []byte(c.args)
		}
		got, err := DirectCall([]byte(c.msg), c.tool, args)
		if err != nil || string(got) != c.want {
			t.Errorf("DirectCall(%s) = %s, %v; want %s", c.msg, got, err, c.want)
		}
	}
}
