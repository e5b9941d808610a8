package mux

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The edge puts a relayed error in place of mcp-go's -32603, and leaves
// every other error as it is.
func TestSwapError(t *testing.T) {
	relayed := (&relayedError{details: mcp.JSONRPCErrorDetails{Code: -32002, Message: "gone", Data: map[string]any{"uri": "x:/<&>"}}}).Error()
	quoted := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, c := range []struct{ name, in, want string }{
		{"mcp-go's answer to a handler's relayed error",
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":` + quoted(relayed) + `}}`,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"gone","data":{"uri":"x:/\u003c\u0026\u003e"}}}`},
		{"wrapped in context by mcp-go",
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32600,"message":` + quoted("request refused: "+relayed) + `}}` + "\n",
			`{"jsonrpc":"2.0","id":"a","error":{"code":-32002,"message":"gone","data":{"uri":"x:/\u003c\u0026\u003e"}}}` + "\n"},
		{"an ordinary error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}`},
		{"a payload that is not an error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"io.mcpmux/relay-error:[1]"}}`,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"io.mcpmux/relay-error:[1]"}}`},
		{"the key in a result", `{"jsonrpc":"2.0","id":1,"result":{"text":"io.mcpmux/relay-error:{}"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"text":"io.mcpmux/relay-error:{}"}}`},
	} {
		if got, _ := swapRelayed([]byte(c.in)); string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// A resource nobody owns is -32002 before 2026-07-28, -32602 from then on,
// and still a resource-not-found error to mcpmux's own hooks.
func TestResourceNotFound(t *testing.T) {
	err := resourceNotFound(context.Background(), "u:/x")
	var re *relayedError
	if !errors.As(err, &re) || re.details.Code != mcp.RESOURCE_NOT_FOUND || !errors.Is(err, server.ErrResourceNotFound) {
		t.Fatalf("resourceNotFound = %#v", err)
	}
}
