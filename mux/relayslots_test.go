package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"
)

// A payload parked in an edge's slots leaves the placeholder as a number and
// comes back byte for byte, once; without the slots, or a second time, the
// message is left as it is.
func TestRelaySlots(t *testing.T) {
	slots := &relaySlots{}
	ctx := withRelaySlots(context.Background(), slots)
	for _, c := range []struct {
		name string
		res  func() []byte
		want string
	}{
		{"2025-11-25", func() []byte {
			r := relayToolResult(json.RawMessage(relayToolPayload))
			park(ctx, r)
			return placeholder(t, 7, r)
		}, `{"jsonrpc":"2.0","id":7,"result":` + relayToolPayload + `}`},
		{"2026-07-28", func() []byte {
			r := relayToolResult(json.RawMessage(`{"content":[],"x":"<&>"}`))
			park(ctx, r)
			return placeholder(t, 7, decorated(r, false))
		}, `{"jsonrpc":"2.0","id":7,"result":{"content":[],"x":"<&>","resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpmux","version":"test"}}}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := c.res()
			if bytes.Contains(msg, []byte(`\"`)) || slots.parked() != 1 {
				t.Fatalf("the payload was not parked (%d parked): %s", slots.parked(), msg)
			}
			if out, ok := swapRelayed(msg); ok || !bytes.Equal(out, msg) {
				t.Fatalf("swapped without the slots: %s", out)
			}
			out, ok := swapRelayedFrom(msg, slots)
			if !ok || string(out) != c.want {
				t.Fatalf("swapped %v:\n%s\nwant\n%s", ok, out, c.want)
			}
			if slots.parked() != 0 {
				t.Fatalf("%d payloads still parked", slots.parked())
			}
			if out, ok := swapRelayedFrom(msg, slots); ok || !bytes.Equal(out, msg) {
				t.Fatalf("swapped twice: %s", out)
			}
		})
	}
	// Not a placeholder, or a context without slots: nothing is parked.
	r := relayToolResult(json.RawMessage(`{}`))
	park(context.Background(), r)
	if _, ok := r.Meta.AdditionalFields[relayKey].(string); !ok {
		t.Fatal("parked without slots")
	}
}

// The answer to a request the client cancelled is not written, and its
// payload leaves its slot all the same.
func TestDroppedAnswerFreesItsSlot(t *testing.T) {
	h := &halfClose{idle: make(chan struct{}, 1), log: zerolog.Nop()}
	var out bytes.Buffer
	aw := h.writer(&out).(*answerWriter)
	h.expect("7", "7", nil)
	h.cancelled("7")
	r := relayToolResult(json.RawMessage(relayToolPayload))
	park(withRelaySlots(context.Background(), aw.slots), r)
	msg := placeholder(t, 7, r)
	if n, err := aw.Write(msg); err != nil || n != len(msg) {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if out.Len() != 0 || aw.slots.parked() != 0 || h.pending.Load() != 0 {
		t.Fatalf("wrote %q; %d parked, %d pending", out.String(), aw.slots.parked(), h.pending.Load())
	}
}
