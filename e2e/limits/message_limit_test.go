package limits

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// max_message_bytes on what a stdio client and a remote child send.

// A stdio client's line over max_message_bytes is read to its end without
// being held, answered with -32600 (under its id when its start has one),
// logged, and nothing else is affected: the requests around it are
// answered, and mcpmux's memory does not grow with the line.
func TestClientLineOverMessageLimit(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "call_timeout = \"10s\"\n\n[limits]\nmax_message_bytes = \"64KiB\"", ts.Server{Alias: "lab", ReadOnly: []string{"echo"}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartRawMux(t, lab)
	m.Write(t, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"))
	if msg := m.Next(t); string(msg["id"]) != "1" || msg["result"] == nil {
		t.Fatalf("initialize: %v", msg)
	}
	// Children up, so that a call answers at once.
	m.Write(t, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n"))
	if msg := m.Next(t); string(msg["id"]) != "2" || !bytes.Contains(msg["result"], []byte("lab__echo")) {
		t.Fatalf("tools/list: %v", msg)
	}
	_, before := ts.Memory(t, m.Cmd.Process.Pid)

	// 1 MiB with an id up front, then 256 MiB of garbage, each with a
	// request after it.
	big := `{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"lab__echo","arguments":{"message":"` +
		strings.Repeat("x", 1<<20) + `"}}}` + "\n"
	written := make(chan struct{})
	go func() {
		defer close(written)
		m.Write(t, []byte(big))
		m.Write(t, []byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`+"\n"))
		chunk := bytes.Repeat([]byte("garbage "), 1<<17) // 1 MiB
		for range 256 {
			m.Write(t, chunk)
		}
		m.Write(t, []byte("\n"+`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lab__echo","arguments":{"message":"after"}}}`+"\n"))
	}()
	want := []struct{ id, has string }{
		{`"big-1"`, `"error":{"code":-32600,"message":"the message exceeded max_message_bytes (64KiB) and was dropped"}`},
		{`3`, `"result":{}`},
		{`null`, `"error":{"code":-32600,"message":"the message exceeded max_message_bytes (64KiB) and was dropped"}`},
		{`4`, `lab: after`},
	}
	for _, w := range want {
		msg := m.Next(t)
		raw, _ := json.Marshal(msg)
		if string(msg["id"]) != w.id || !bytes.Contains(raw, []byte(w.has)) {
			t.Errorf("got %s, want id %s with %s", raw, w.id, w.has)
		}
	}
	<-written
	if n := len(m.Log.WaitLines(t, "the oversized messages", 2, ts.Msg("client sent a message over max_message_bytes; it was dropped"))); n != 2 {
		t.Errorf("%d oversized messages logged, want 2", n)
	}
	_, peak := ts.Memory(t, m.Cmd.Process.Pid)
	t.Logf("mcpmux VmHWM %d MiB before 257 MiB of oversized lines, %d MiB after", before>>20, peak>>20)
	if grew := (peak - before) / (1 << 20); grew > 16 {
		t.Errorf("mcpmux's peak grew by %d MiB reading lines it drops", grew)
	}
}

// A remote child's response over max_message_bytes: the call gets an
// isError result saying so. Over streamable HTTP the session survives; over
// the legacy SSE transport, where the answer comes on the one event stream,
// the stream is given up and the child is connected again. Either way the
// next call works.
func TestRemoteResponseOverMessageLimit(t *testing.T) {
	t.Parallel()
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			lab, _ := ts.RemoteLabMux(t, "call_timeout = \"10s\"\n\n[limits]\nmax_message_bytes = \"16KiB\"", transport, "")
			m := ts.StartMux(t, lab)
			// The answer carries the message twice: as text and as
			// structured content.
			res := m.MustCall("docs__echo", map[string]any{"message": strings.Repeat("y", 10<<10)})
			text := ts.Text(res)
			t.Logf("%s: %s", transport, text)
			if !res.IsError || !strings.Contains(text, "max_message_bytes (16KiB)") {
				t.Fatalf("big echo: isError=%v text=%.300q, want an error naming max_message_bytes", res.IsError, text)
			}
			if transport == "streamable" {
				if text != "the server's response to echo exceeded max_message_bytes (16KiB) and was dropped; the call reached the server" {
					t.Errorf("text %q", text)
				}
				if lines := ts.WentAway(m); len(lines) != 0 {
					t.Errorf("the session was lost: %v", lines)
				}
			}
			m.Log.WaitLine(t, "the limit logged", ts.Msg("server sent a message over max_message_bytes; it was dropped", "server", "docs"))
			if res := m.MustCall("docs__echo", map[string]any{"message": "small"}); res.IsError || ts.Text(res) != "docs: small" {
				t.Errorf("small echo: isError=%v text=%q", res.IsError, ts.Text(res))
			}
		})
	}
}
