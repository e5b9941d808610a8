package child

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

var callResultCases = []struct {
	raw     string
	plain   bool // recognised without mcp-go's parser
	ok      bool // readable
	isError bool
}{
	{`{"content":[{"type":"text","text":"hi"}]}`, true, true, false},
	{`{"content":[],"isError":true}`, true, true, true},
	{` { "content" : [ { "text" : "a\"b" , "type" : "text" } , {"type":"text","text":""} ] , "isError" : false } `, true, true, false},
	{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":[1,2.5e3,{"a":null}]},"x":{"y":1}}`, true, true, false},
	{`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`, false, true, false},
	{`{"content":[{"type":"text","text":"x","annotations":{"priority":1}}]}`, false, true, false},
	{`{"content":[{"type":"text","text":"x"}],"_meta":{"a":1}}`, false, true, false},
	{`{"content":[{"type":"text","text":"x"}],"IsError":true}`, false, true, true},
	{`{"content":[],"isError":false,"isError":true}`, false, true, true},
	{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":1e400}}`, false, false, false},
	{`{"content":[{"type":"text","text":1}]}`, false, false, false},
	{`{"content":[{"type":"nope"}]}`, false, false, false},
	{`{"content":{}}`, false, false, false},
	{`{"isError":true}`, false, false, false},
	{`{"content":null}`, false, true, false}, // mcp-go reads a null content as none
	{`{"content":[],"isError":"yes"}`, false, false, false},
	{`[]`, false, false, false},
}

func TestCheckCallResult(t *testing.T) {
	for _, c := range callResultCases {
		_, plain := plainCallResult([]byte(c.raw))
		if plain != c.plain {
			t.Errorf("plainCallResult(%s) recognised = %v, want %v", c.raw, plain, c.plain)
		}
		isError, err := checkCallResult(json.RawMessage(c.raw))
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrMalformedResult) || isError != c.isError {
			t.Errorf("checkCallResult(%s) = %v, %v; want readable %v, isError %v", c.raw, isError, err, c.ok, c.isError)
		}
	}
}

// FuzzCallResultCheck: what the one-scan check accepts, mcp-go's parser
// accepts too, with the same isError; so checkCallResult refuses exactly
// what mcp.ParseCallToolResult refuses.
func FuzzCallResultCheck(f *testing.F) {
	for _, c := range callResultCases {
		f.Add([]byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // a transport hands on only what it decoded
		}
		isError, ok := plainCallResult(raw)
		if !ok {
			return
		}
		rm := json.RawMessage(raw)
		parsed, err := mcp.ParseCallToolResult(&rm)
		if err != nil {
			t.Fatalf("recognised %s, which mcp-go refuses: %v", raw, err)
		}
		if parsed.IsError != isError {
			t.Fatalf("%s: isError %v, mcp-go reads %v", raw, isError, parsed.IsError)
		}
	})
}

func BenchmarkCheckCallResult(b *testing.B) {
	text, _ := json.Marshal(strings.Repeat(`say "x" `, 256<<10/9))
	raw := json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`)
	b.Run("plain", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := checkCallResult(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mcp-go", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := mcp.ParseCallToolResult(&raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
