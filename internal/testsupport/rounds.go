package testsupport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ModernRPC is MustRPC for a hand-made 2026-07-28 request (params with
// ModernMeta): over HTTP it carries the headers that revision requires.
func ModernRPC(t testing.TB, c *client.Client, method string, params any) json.RawMessage {
	t.Helper()
	res, rerr := ModernTry(t, c, method, params)
	if rerr != nil {
		t.Fatalf("%s %v: %v", method, params, rerr)
	}
	return res
}

// ModernTry is RPC for a hand-made 2026-07-28 request, as ModernRPC sends
// it: its result, or its JSON-RPC error.
func ModernTry(t testing.TB, c *client.Client, method string, params any) (json.RawMessage, *RPCError) {
	t.Helper()
	encoded, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	header := http.Header{}
	for k, v := range mcp.StandardHeaders(mcp.ProtocolVersion20260728, mcp.MCPMethod(method), encoded) {
		header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	rpcIDs.Lock()
	rpcIDs.n++
	id := fmt.Sprintf("modern-%d", rpcIDs.n)
	rpcIDs.Unlock()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params, Header: header})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: rawData(resp.Error.Data)}
	}
	return resp.Result, nil
}

// ModernMeta is the _meta a hand-made 2026-07-28 request carries: the
// protocol version, clientInfo and the capabilities given (e.g.
// {"sampling":{}}).
func ModernMeta(caps map[string]any) map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "hand", "version": "1"},
	}
}

// InputRequired is a tools/call, prompts/get or resources/read result as a
// 2026-07-28 client reads it, input-required or final, with the requests'
// params as they came.
type InputRequired struct {
	ResultType    string `json:"resultType"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
	IsError      bool   `json:"isError"`
	Content      []struct {
		Text string `json:"text"`
	} `json:"content"`
	// Messages and Contents are a final prompts/get's and resources/read's.
	Messages []struct {
		Content struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"messages"`
	Contents []struct {
		Text string `json:"text"`
	} `json:"contents"`
}

// ReadInputRequired decodes raw, failing t if it cannot.
func ReadInputRequired(t testing.TB, raw json.RawMessage) InputRequired {
	t.Helper()
	var r InputRequired
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}

// Text is the text of a final result's first content (a tool's), message
// (a prompt's) or contents (a resource's), or "".
func (r InputRequired) Text() string {
	switch {
	case len(r.Content) > 0:
		return r.Content[0].Text
	case len(r.Messages) > 0:
		return r.Messages[0].Content.Text
	case len(r.Contents) > 0:
		return r.Contents[0].Text
	}
	return ""
}

// StartMuxClient is StartMux with a client of protocol version and opts
// (e.g. its sampling, elicitation and roots handlers).
func StartMuxClient(t testing.TB, lab *Lab, version string, opts ...client.ClientOption) *Mux {
	t.Helper()
	return startMux(t, lab, version, nil, nil, opts...)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
