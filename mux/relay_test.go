package mux

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// A tool result no typed struct keeps whole: fields no spec defines at the
// top, in _meta (a number beyond float64's precision), in content items and
// in annotations, and structuredContent; text that HTML escaping would
// change.
const relayToolPayload = `{"content":[{"type":"text","text":"<b>&amp;</b> \u2028","annotations":{"audience":["user"],"x-weight":12345678901234567890},"x-item":{"deep":[1,2.50,-0e0]}}],` +
	`"structuredContent":{"n":12345678901234567890,"f":1.000000000000000000001},"isError":false,"x-top":null,` +
	`"_meta":{"big":12345678901234567890,"io.modelcontextprotocol/related":{"a":1}}}`

// serverInfoMeta is the _meta entry mcp-go's modern decoration adds.
const serverInfoMeta = `"io.modelcontextprotocol/serverInfo":{"name":"mcpmux","version":"test"}`

// placeholder is the message mcp-go writes for result under id, encoded as
// mcp-go encodes it (encoding/json, HTML escaping on).
func placeholder(t testing.TB, id any, result any) []byte {
	t.Helper()
	b, err := json.Marshal(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), result))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decorated is what decorateResult does to a result for a 2026-07-28
// client: resultType, serverInfo in _meta, and for list and read results
// the caching hints.
func decorated[T mcp.ResultMetadata](res T, cacheable bool) T {
	if res.GetResultType() == "" {
		res.SetResultType(mcp.ResultTypeComplete)
	}
	res.EnsureResultMeta().SetServerInfo(mcp.Implementation{Name: "mcpmux", Version: "test"})
	if c, ok := any(res).(mcp.CacheHintSetter); ok && cacheable {
		c.SetCacheHints(0, mcp.CacheScopePrivate)
	}
	return res
}

func readPlaceholder(raw string) *mcp.ReadResourceResult {
	res := &mcp.ReadResourceResult{Contents: relayResourceContents(json.RawMessage(raw))}
	relayReadResult(res)
	return res
}

func TestSwapRelayed(t *testing.T) {
	cases := []struct {
		name   string
		msg    []byte
		result string // the result the client must get
	}{
		{"tool result, 2025-11-25", placeholder(t, 7, relayToolResult(json.RawMessage(relayToolPayload))), relayToolPayload},
		{"tool result, 2026-07-28: the decoration joins the payload's _meta and top",
			placeholder(t, 7, decorated(relayToolResult(json.RawMessage(relayToolPayload)), false)),
			strings.TrimSuffix(relayToolPayload, "}}") + "," + serverInfoMeta + `},"resultType":"complete"}`},
		{"payload without _meta, 2026-07-28",
			placeholder(t, "a", decorated(relayToolResult(json.RawMessage(`{"content":[]}`)), false)),
			`{"content":[],"resultType":"complete","_meta":{` + serverInfoMeta + `}}`},
		{"empty payload, 2026-07-28",
			placeholder(t, "a", decorated(relayToolResult(json.RawMessage(`{}`)), false)),
			`{"resultType":"complete","_meta":{` + serverInfoMeta + `}}`},
		{"empty payload _meta, 2026-07-28",
			placeholder(t, "a", decorated(relayToolResult(json.RawMessage(`{"content":[],"_meta":{}}`)), false)),
			`{"content":[],"_meta":{` + serverInfoMeta + `},"resultType":"complete"}`},
		{"the payload's own keys win",
			placeholder(t, 1, decorated(relayToolResult(json.RawMessage(`{"resultType":"input_required","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"child"}}}`)), false)),
			`{"resultType":"input_required","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"child"}}}`},
		{"a _meta that is not an object gets nothing",
			placeholder(t, 1, decorated(relayToolResult(json.RawMessage(`{"_meta":null}`)), false)),
			`{"_meta":null,"resultType":"complete"}`},
		{"whitespace in the payload is kept",
			placeholder(t, 1, relayToolResult(json.RawMessage("{ \"content\" : [ ],\n\t\"x\" : 1 }"))),
			"{ \"content\" : [ ],\n\t\"x\" : 1 }"},
		{"read result, 2026-07-28: caching hints",
			placeholder(t, 2, decorated(readPlaceholder(`{"contents":[{"uri":"file:///a","text":"x","x":1}]}`), true)),
			`{"contents":[{"uri":"file:///a","text":"x","x":1}],"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{` + serverInfoMeta + `}}`},
		{"prompt result", placeholder(t, 3, relayPromptResult(json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hi","x":true}}],"description":"d"}`))),
			`{"messages":[{"role":"user","content":{"type":"text","text":"hi","x":true}}],"description":"d"}`},
		{"list result via relayInto", func() []byte {
			res := &mcp.ListToolsResult{Tools: []mcp.Tool{}}
			relayInto(res, json.RawMessage(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"annotations":{"x":1}}],"nextCursor":"c"}`))
			return placeholder(t, 4, decorated(res, true))
		}(), `{"tools":[{"name":"a","inputSchema":{"type":"object"},"annotations":{"x":1}}],"nextCursor":"c","resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{` + serverInfoMeta + `}}`},
		{"ids as written: a big number", []byte(`{"jsonrpc":"2.0","id":12345678901234567890,"result":{"_meta":{"io.mcpmux/relay":"{\"a\":1}"},"content":[]}}` + "\n"),
			`{"a":1}`},
		{"ids as written: an escaped string", []byte(` {"id":"\u0061\"","jsonrpc":"2.0","result":{"content":[],"_meta":{"io.mcpmux/relay":"{}"}}} `),
			`{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, ok := swapRelayed(c.msg)
			if !ok {
				t.Fatalf("not swapped: %s", c.msg)
			}
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			got, in := splitMessage(t, out), splitMessage(t, c.msg)
			if string(got["result"]) != c.result {
				t.Errorf("result\n got %s\nwant %s", got["result"], c.result)
			}
			if string(got["id"]) != string(in["id"]) || string(got["jsonrpc"]) != string(in["jsonrpc"]) {
				t.Errorf("id or jsonrpc changed: %s -> %s", c.msg, out)
			}
			// Everything outside the result is mcp-go's bytes.
			inRes, outRes := bytes.Index(c.msg, in["result"]), bytes.Index(out, got["result"])
			if string(out[:outRes]) != string(c.msg[:inRes]) || string(out[outRes+len(got["result"]):]) != string(c.msg[inRes+len(in["result"]):]) {
				t.Errorf("bytes around the result changed: %q -> %q", c.msg, out)
			}
		})
	}
}

// splitMessage returns msg's top-level values as they are written.
func splitMessage(t testing.TB, msg []byte) map[string]json.RawMessage {
	t.Helper()
	o, ok := jsonwire.Members(msg)
	if !ok {
		t.Fatalf("not an object: %s", msg)
	}
	out := map[string]json.RawMessage{}
	for _, m := range o.Members {
		out[m.Key] = msg[m.Start:m.End]
	}
	return out
}

// jsonwire knows relayKey: reading it as a key costs no allocation beyond
// the members' one.
func TestRelayKeyKnown(t *testing.T) {
	msg := []byte(`{"` + relayKey + `":1}`)
	if n := testing.AllocsPerRun(10, func() { _, _ = jsonwire.Members(msg) }); n != 1 {
		t.Errorf("reading %s: %v allocations, want 1 (the members)", msg, n)
	}
}

func TestSwapRelayedLeavesAlone(t *testing.T) {
	cases := map[string]string{
		"empty":                    ``,
		"null":                     `null`,
		"array":                    `[{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"}}}]`,
		"no key":                   `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`,
		"truncated":                `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"}}`,
		"no id":                    `{"jsonrpc":"2.0","result":{"_meta":{"io.mcpmux/relay":"{}"}}}`,
		"no jsonrpc":               `{"id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"}}}`,
		"two ids":                  `{"jsonrpc":"2.0","id":1,"id":2,"result":{"_meta":{"io.mcpmux/relay":"{}"}}}`,
		"trailing garbage":         `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"}}} x`,
		"a notification":           `{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"io.mcpmux/relay":"{}"}}}`,
		"a request":                `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","result":{"_meta":{"io.mcpmux/relay":"{}"}}}`,
		"an error":                 `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"_meta":{"io.mcpmux/relay":"{}"}}}}`,
		"an error beside a result": `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"}},"error":{}}`,
		"two results":              `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"}},"result":{}}`,
		"result not an object":     `{"jsonrpc":"2.0","id":1,"result":"\"io.mcpmux/relay\""}`,
		"payload not a string":     `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":{"a":1}}}}`,
		"payload not JSON":         `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{\"a\":"}}}`,
		"payload not an object":    `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"[1]"}}}`,
		"payload a string":         `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"\"x\""}}}`,
		"two payloads":             `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}","io.mcpmux/relay":"{}"}}}`,
		"two _meta":                `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"{}"},"_meta":{}}}`,
		"_meta not an object":      `{"jsonrpc":"2.0","id":1,"result":{"_meta":"io.mcpmux/relay","x":"io.mcpmux/relay"}}`,
		"key deeper than _meta":    `{"jsonrpc":"2.0","id":1,"result":{"contents":[{"uri":"io.mcpmux/relay","_meta":{"io.mcpmux/relay":"{}"}}]}}`,
		"key in a text":            `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\"io.mcpmux/relay\":\"{}\""}]}}`,
		"key only in the payload":  `{"jsonrpc":"2.0","id":1,"result":{"x":{"_meta":{"io.mcpmux/relay":"{}"}}}}`,
		"unescaped control in key": "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"_meta\":{\"io.mcpmux/relay\":\"{\\\"\x01\\\":1}\"}}}",
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			out, ok := swapRelayed([]byte(msg))
			if ok || string(out) != msg {
				t.Errorf("changed: %q -> %q", msg, out)
			}
		})
	}
}

func TestSwapFramed(t *testing.T) {
	msg := placeholder(t, 1, relayToolResult(json.RawMessage(`{"content":[],"x":1}`)))
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[],"x":1}}`
	cases := map[string]struct{ in, want string }{
		"JSON body":         {string(msg) + "\n", want + "\n"},
		"SSE event":         {"event: message\ndata: " + string(msg) + "\n\n", "event: message\ndata: " + want + "\n\n"},
		"SSE event with id": {"id: 3\nevent: message\ndata: " + string(msg) + "\n\n", "id: 3\nevent: message\ndata: " + want + "\n\n"},
		"SSE data alone":    {"data: " + string(msg), "data: " + want},
		"SSE notification":  {"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"io.mcpmux/relay\":1}}\n\n", ""},
		"not a message":     {`event: "io.mcpmux/relay"` + "\n\n", ""},
		"plain text":        {`Bad Request "io.mcpmux/relay"` + "\n", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, ok := swapFramed([]byte(c.in))
			if c.want == "" {
				if ok || string(out) != c.in {
					t.Errorf("changed: %q -> %q", c.in, out)
				}
				return
			}
			if !ok || string(out) != c.want {
				t.Errorf("got %q (%v)\nwant %q", out, ok, c.want)
			}
		})
	}
}

// The hooks move a carried payload and leave every other result alone.
func TestRelayHooksLeaveOthersAlone(t *testing.T) {
	read := &mcp.ReadResourceResult{Contents: []mcp.ResourceContents{mcp.TextResourceContents{URI: relayKey, Text: "t"}}}
	relayReadResult(read)
	if read.Meta != nil || len(read.Contents) != 1 {
		t.Errorf("a contents item without a payload was taken: %+v", read)
	}
	two := &mcp.ReadResourceResult{Contents: append(relayResourceContents(json.RawMessage(`{}`)), mcp.TextResourceContents{URI: "file:///b"})}
	relayReadResult(two)
	if two.Meta != nil || len(two.Contents) != 2 {
		t.Errorf("a payload among other contents was taken: %+v", two)
	}
	comp := &mcp.CompleteResult{Completion: mcp.Completion{Values: []string{relayKey, "{}"}, Total: 2}}
	relayCompleteResult(comp)
	if comp.Meta != nil || len(comp.Completion.Values) != 2 {
		t.Errorf("real completion values were taken: %+v", comp)
	}
	relayReadResult(nil)
	relayCompleteResult(nil)

	carried := &mcp.CompleteResult{Completion: *relayCompletion(json.RawMessage(`{"completion":{"values":["a"]}}`))}
	relayCompleteResult(carried)
	if got := carried.Meta.GetMetaField(relayKey); got != `{"completion":{"values":["a"]}}` || len(carried.Completion.Values) != 0 {
		t.Errorf("the payload was not moved: %+v", carried)
	}
}

// BenchmarkSwapRelayedMiss is the cost of a message with nothing to swap,
// which is nearly every message.
func BenchmarkSwapRelayedMiss(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 4096) + `"}]}}` + "\n")
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, ok := swapRelayed(msg); ok {
			b.Fatal("swapped")
		}
	}
}

// BenchmarkSwapRelayedHit is the cost of swapping a 64 KiB result.
func BenchmarkSwapRelayedHit(b *testing.B) {
	payload := `{"content":[{"type":"text","text":"` + strings.Repeat(`a \"quoted\" <word> `, 64<<10/20) + `"}]}`
	msg := placeholder(b, 1, decorated(relayToolResult(json.RawMessage(payload)), false))
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		if _, ok := swapRelayed(msg); !ok {
			b.Fatal("not swapped")
		}
	}
}
