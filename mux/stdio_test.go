package mux

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// A request the stdio client cancels is cancelled at the child and never
// answered, as the protocol has it; later requests are.
func TestStdioCancelledRequestGoesUnanswered(t *testing.T) {
	l := startCallLab(t, "", "")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- l.m.ServeStdio(context.Background(), "reader", inR, outW) }()
	lines := make(chan map[string]json.RawMessage, 16)
	go func() {
		defer close(lines)
		dec := json.NewDecoder(outR)
		for {
			var msg map[string]json.RawMessage
			if dec.Decode(&msg) != nil {
				return
			}
			lines <- msg
		}
	}()
	send := func(msg string) {
		t.Helper()
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(id string) map[string]json.RawMessage {
		t.Helper()
		for msg := range lines {
			if string(msg["id"]) == "7" {
				t.Fatalf("the cancelled request was answered: %s", msg["result"])
			}
			if string(msg["id"]) == id {
				return msg
			}
		}
		t.Fatalf("no answer to %s", id)
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	answer("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"c"}}}`)
	if tag := <-l.started; tag != "c" {
		t.Fatalf("started %q", tag)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	// The call ends at mcpmux and at the child; mcpmux's audit line says so.
	testsupport.WaitFor(t, "the cancelled call to end", func() bool { return strings.Contains(l.log.String(), `"outcome":"cancelled"`) })
	send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	answer("8")
	_ = inW.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	_ = outW.Close()
	for msg := range lines {
		if string(msg["id"]) == "7" {
			t.Fatalf("the cancelled request was answered: %s", msg["result"])
		}
	}
}

// A client's _meta reaches the child with its call, but for the protocol's
// own entries; its progress token is replaced by mcpmux's.
func TestClientMetaReachesTheChild(t *testing.T) {
	seen := make(chan map[string]any, 1)
	l := startCallLab(t, "", "", server.ServerTool{
		Tool: mcp.NewTool("meta"),
		Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			got := map[string]any{}
			if req.Params.Meta != nil {
				got = maps.Clone(req.Params.Meta.AdditionalFields)
				got["progressToken"] = req.Params.Meta.ProgressToken
			}
			seen <- got
			return mcp.NewToolResultText("ok"), nil
		},
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- l.m.ServeStdio(context.Background(), "reader", inR, outW) }()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lab__meta","arguments":{},"_meta":{"progressToken":5,"com.example/trace":"abc","io.modelcontextprotocol/related-task":{"taskId":"x"}}}}`,
	} {
		if _, err := io.WriteString(inW, msg+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	got := <-seen
	if got["com.example/trace"] != "abc" {
		t.Errorf("the child got _meta %v, without the client's entry", got)
	}
	if tok, _ := got["progressToken"].(string); !strings.HasPrefix(tok, "mcpmux-") {
		t.Errorf("the child got progress token %v, want mcpmux's own", got["progressToken"])
	}
	if _, ok := got["io.modelcontextprotocol/related-task"]; ok {
		t.Errorf("the child got the protocol's own entry: %v", got)
	}
	_ = inW.Close()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	_ = outW.Close()
}

// A client's error answer to a relayed sampling request is no request:
// mcp-go takes it without answering, so the end of the input does not wait
// for an answer to it (call_timeout, and so the drain's limit, is longer
// than the test waits).
func TestStdioClientErrorAnswerIsNotWaitedFor(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{mux: `call_timeout = "10m"`})
	s := openSessionWith(t, l.m, "alice",
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":"call","method":"tools/call","params":{"name":"st__ask","arguments":{"what":"sampling"}}}`)
	next := func(what string) string {
		select {
		case msg, ok := <-s.out:
			if !ok {
				t.Fatalf("the session ended waiting for %s", what)
			}
			return msg
		case <-time.After(testsupport.Wait):
			t.Fatalf("no %s", what)
		}
		return ""
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	for req.Method != string(mcp.MethodSamplingCreateMessage) {
		if err := json.Unmarshal([]byte(next("sampling request")), &req); err != nil {
			t.Fatal(err)
		}
	}
	s.send(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32603,"message":"the user said no"}}`)
	for {
		msg := next("answer to the call")
		if id, ok := testsupport.RefAnswerID([]byte(msg)); ok && id == `"call"` {
			break
		}
	}
	_ = s.in.Close()
	select {
	case err := <-s.served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testsupport.Wait):
		t.Fatal("ServeStdio is still waiting for an answer to the client's error answer")
	}
	for range s.out {
	}
}
