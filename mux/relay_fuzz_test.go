package mux

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzRelaySwap checks swapRelayed and swapFramed on any bytes: they never
// panic; what they do not swap comes back unchanged; what swapRelayed swaps
// is valid JSON, a response with the same id and jsonrpc bytes, whose result
// is an object holding every key of the payload.
func FuzzRelaySwap(f *testing.F) {
	for _, r := range []any{
		relayToolResult(json.RawMessage(relayToolPayload)),
		decorated(relayToolResult(json.RawMessage(relayToolPayload)), false),
		decorated(relayToolResult(json.RawMessage(`{}`)), false),
		decorated(readPlaceholder(relayReadPayload), true),
		relayPromptResult(json.RawMessage(relayPromptPayload)),
	} {
		f.Add(placeholder(f, 1, r))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","result":{"_meta":{"io.mcpmux/relay":"{\"_meta\":{}}","k":1},"resultType":"complete"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.mcpmux/relay":"[1]"}}}`))
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"_meta\":{\"io.mcpmux/relay\":\"{}\"}}}\n\n"))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"x","params":{"_meta":{"io.mcpmux/relay":"{}"}}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		in := bytes.Clone(msg)
		if out, ok := swapFramed(msg); !ok && !bytes.Equal(out, in) {
			t.Fatalf("swapFramed changed what it did not swap: %q -> %q", in, out)
		}
		out, ok := swapRelayed(msg)
		if !bytes.Equal(msg, in) {
			t.Fatalf("the input was modified")
		}
		if !ok {
			if !bytes.Equal(out, in) {
				t.Fatalf("changed what it did not swap: %q -> %q", in, out)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %q -> %q", in, out)
		}
		before, after := splitMessage(t, in), splitMessage(t, out)
		if !bytes.Equal(before["id"], after["id"]) || !bytes.Equal(before["jsonrpc"], after["jsonrpc"]) || len(after["id"]) == 0 {
			t.Fatalf("id or jsonrpc changed: %q -> %q", in, out)
		}
		res := splitMessage(t, after["result"])
		var holder, meta map[string]json.RawMessage
		var payload string
		if json.Unmarshal(before["result"], &holder) != nil || json.Unmarshal(holder["_meta"], &meta) != nil ||
			json.Unmarshal(meta[relayKey], &payload) != nil {
			t.Fatalf("swapped without a payload: %q", in)
		}
		for k := range splitMessage(t, []byte(payload)) {
			if _, ok := res[k]; !ok {
				t.Fatalf("payload key %q lost: %q -> %q", k, in, out)
			}
		}
	})
}
