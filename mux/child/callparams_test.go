package child

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// A tools/call to a child carries the bytes it carried when its params
// were marshalled by reflection (mcp-go's CallToolParams, then the _meta
// added), whichever way callParams writes them.
func TestCallParamsBytes(t *testing.T) {
	reflected := func(p callParams) ([]byte, error) {
		b, err := json.Marshal(p.CallToolParams)
		if err != nil || p.meta == nil {
			return b, err
		}
		return jsonwire.WithField(b, "_meta", p.meta)
	}
	cases := []struct {
		name, args, meta string
		task             bool
	}{
		{name: "echo", args: `{"text":"hello"}`},
		{name: "tool_00001", args: `{"query":"q","limit":3}`, meta: `{"progressToken":"mcpmux-7"}`},
		{name: "a<b>&c", args: ` { "text" : "x < y & z > w" , "n" : [ 1 , 2 ] } `},
		{name: "naïve\u2028\"q\"\\", args: `{"s":"\u2028 é \u003c"}`, meta: ` { "k" : "<v>" } `},
		{name: "echo", args: `{}`, task: true},
	}
	for _, c := range cases {
		p := callParams{CallToolParams: mcp.CallToolParams{Name: c.name, Arguments: json.RawMessage(c.args)}}
		if c.meta != "" {
			p.meta = json.RawMessage(c.meta)
		}
		if c.task {
			p.Task = &mcp.TaskParams{}
		}
		want, err := reflected(p)
		if err != nil {
			t.Fatal(err)
		}
		// What the transport writes: the request around the params.
		wire := func(params any) string {
			b, err := json.Marshal(transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("mcpmux-1"), Method: "tools/call", Params: params})
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if got, want := wire(p), wire(json.RawMessage(want)); got != want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.name, c.args, got, want)
		}
	}
}
