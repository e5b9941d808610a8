package child

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// transportDelivers is what mcp-go's stdio transport (readResponses) makes of one
// line from a child: whether it is a response, and its id, result and
// whether it has an error.
func transportDelivers(line []byte) (id string, result json.RawMessage, hasError, ok bool) {
	line = bytes.TrimRight(line, "\r\n")
	var base struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *mcp.RequestId `json:"id,omitempty"`
		Method  string         `json:"method,omitempty"`
	}
	if json.Unmarshal(line, &base) != nil {
		return "", nil, false, false
	}
	if base.Method != "" {
		if base.ID == nil {
			return "", nil, false, false // a notification
		}
		var req transport.JSONRPCRequest
		if json.Unmarshal(line, &req) == nil {
			return "", nil, false, false // a request
		}
	}
	var resp transport.JSONRPCResponse
	if json.Unmarshal(line, &resp) != nil {
		return "", nil, false, false
	}
	return resp.ID.String(), resp.Result, resp.Error != nil, true
}

// FuzzPlainAnswer checks that plainAnswer, which lets a stdio
// child's answer reach its call as the bytes the child wrote, takes a line
// only where mcp-go's stdio transport would deliver it as an answer under
// the same string id, with that result and no error.
func FuzzPlainAnswer(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-1","result":{"content":[{"type":"text","text":"hi"}]}}` + "\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-2","result":{}, "error":{"code":1,"message":"x"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n" + `{"id":"mcpmux-1","jsonrpc":"2.0","result":{"a":1}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-1","Result":{},"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"mcpmux-1","result":{"b":[]}}` + "\r\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-3","result":{"x":"` + strings.Repeat("y", 300) + `"}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, line := range testsupport.Lines(data) {
			id, result, ok := plainAnswer(bytes.TrimRight(line, "\r\n"))
			if !ok {
				continue
			}
			tid, tresult, hasError, tok := transportDelivers(line)
			var want string
			if json.Unmarshal(id, &want) != nil || !tok || hasError || tid != "string:"+want || !bytes.Equal(result, tresult) {
				t.Fatalf("plainAnswer(%q) = %s, %s; the transport delivers (%q, %q, error %v, %v)", short(line), id, short(result), tid, short(tresult), hasError, tok)
			}
		}
	})
}

// short is b, or its start, for a message.
func short(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}
