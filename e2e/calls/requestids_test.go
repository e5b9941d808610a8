package calls

import (
	"bytes"
	"encoding/json"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The real binary over stdio: a request whose id is an object or null is
// refused with -32600 under a null id (a null-id tools/call was left
// unanswered before), and a 30-digit id comes back exactly as written.
func TestStdioRequestIDsEndToEnd(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "lab", ReadOnly: []string{"echo"}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartRawMux(t, lab)
	m.Write(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"))
	if msg := m.Next(t); string(msg["id"]) != "1" || msg["result"] == nil {
		t.Fatalf("initialize: %v", msg)
	}
	call := func(id string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"lab__echo","arguments":{"message":"m"}}}` + "\n")
	}
	for _, c := range []struct {
		line    []byte
		id, has string
	}{
		{call(`{"a":1}`), "null", `"error":{"code":-32600,"message":"invalid request: the id must be a string or a number"}`},
		{call("null"), "null", `"error":{"code":-32600,"message":"invalid request: a request's id must not be null"}`},
		{call("123456789012345678901234567890"), "123456789012345678901234567890", `lab: m`},
	} {
		m.Write(t, c.line)
		msg := m.Next(t)
		raw, _ := json.Marshal(msg)
		if string(msg["id"]) != c.id || !bytes.Contains(raw, []byte(c.has)) {
			t.Errorf("%s: got %s, want id %s with %s", bytes.TrimSpace(c.line), raw, c.id, c.has)
		}
	}
}
