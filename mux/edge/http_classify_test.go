package edge

import (
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzClassify holds classify's shortcut to the decoding it skips: for any
// body, in one chunk or several, and either protocol header, classify says
// what classifyDecoded says.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"\u0069nitialize","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"METHOD":"initialize"}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions\/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"initialize"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"text":"a\nb"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`,
	} {
		f.Add([]byte(s), 0, false)
		f.Add([]byte(s), 7, true)
	}
	f.Fuzz(func(t *testing.T, raw []byte, cut int, modern bool) {
		header := http.Header{}
		if modern {
			header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		}
		bodies := []body{{raw}}
		if cut > 0 && cut < len(raw) {
			bodies = append(bodies, body{raw[:cut], raw[cut:]})
		}
		want := classifyDecoded(header, body{raw})
		for _, b := range bodies {
			if got := classify(header, b); got != want {
				t.Fatalf("classify(%q in %d chunks) = %d, decoding says %d", raw, len(b), got, want)
			}
		}
	})
}

// TestClassify names what a body is to the session registry.
func TestClassify(t *testing.T) {
	modern := http.Header{mcp.HeaderProtocolVersion: {mcp.ProtocolVersion20260728}}
	for _, c := range []struct {
		body   string
		header http.Header
		want   messageKind
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, nil, initializeMessage},
		{`{"jsonrpc":"2.0","id":1,"method":"\u0069nitialize","params":{}}`, nil, initializeMessage},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, modern, otherMessage},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions\/listen"}`, modern, listenMessage},
		{`{"jsonrpc":"2.0","method":"subscriptions/listen"}`, modern, otherMessage},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"initialize"}}`, nil, otherMessage},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, nil, otherMessage},
	} {
		if got := classify(c.header, body{[]byte(c.body)}); got != c.want {
			t.Errorf("%s: %d, want %d", c.body, got, c.want)
		}
	}
}
