package testsupport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// FidelityEnv is the environment of a labserver that offers the catalog
// side of fidelity (LAB_FIDELITY: prompts, resources, templates,
// completion), pages every list one item at a time (LAB_PAGE_SIZE=1), and
// records every request it receives in requests (LAB_REQUESTS; see
// ChildRequests).
func FidelityEnv(requests string) map[string]string {
	return map[string]string{"LAB_FIDELITY": "1", "LAB_PAGE_SIZE": "1", "LAB_REQUESTS": requests}
}

// ChildRequest is one request a labserver received.
type ChildRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ChildRequests returns the requests with the given method that the
// labserver recording to path received, in order.
func ChildRequests(t testing.TB, path, method string) []ChildRequest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []ChildRequest
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r ChildRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// RPCError is a JSON-RPC error as it came over the wire.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

var rpcIDs struct {
	sync.Mutex
	n int
}

// RPC sends one request through c's transport, bounded by Wait, and
// returns its result exactly as it came over the wire, or its JSON-RPC
// error. A transport failure fails the test.
func RPC(t testing.TB, c *client.Client, method string, params any) (json.RawMessage, *RPCError) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	rpcIDs.Lock()
	rpcIDs.n++
	id := fmt.Sprintf("fidelity-%d", rpcIDs.n)
	rpcIDs.Unlock()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method, Params: params})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: rawData(resp.Error.Data)}
	}
	return resp.Result, nil
}

func rawData(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// MustRPC is RPC failing the test on a JSON-RPC error.
func MustRPC(t testing.TB, c *client.Client, method string, params any) json.RawMessage {
	t.Helper()
	res, rerr := RPC(t, c, method, params)
	if rerr != nil {
		t.Fatalf("%s %v: %v", method, params, rerr)
	}
	return res
}

// ListAll reads every page of a list method (tools/list, prompts/list,
// resources/list, resources/templates/list) and returns the items of
// member, raw, in order.
func ListAll(t testing.TB, c *client.Client, method, member string) []json.RawMessage {
	t.Helper()
	var all []json.RawMessage
	cursor := ""
	for page := 1; ; page++ {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		raw := MustRPC(t, c, method, params)
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(res[member], &items); err != nil {
			t.Fatalf("%s: %s: %v in %s", method, member, err, raw)
		}
		all = append(all, items...)
		cursor = ""
		if c, ok := res["nextCursor"]; ok {
			_ = json.Unmarshal(c, &cursor)
		}
		if cursor == "" {
			return all
		}
		if page > 200 {
			t.Fatalf("%s does not end", method)
		}
	}
}

// NoteLog records, in order, every notification a client receives.
type NoteLog struct {
	mu    sync.Mutex
	notes []mcp.JSONRPCNotification
	more  chan struct{} // closed and replaced whenever one arrives
}

// RecordNotes starts recording the notifications c receives from now on.
func RecordNotes(c *client.Client) *NoteLog {
	l := &NoteLog{more: make(chan struct{})}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.notes = append(l.notes, n)
		close(l.more)
		l.more = make(chan struct{})
	})
	return l
}

// All returns the notifications received so far.
func (l *NoteLog) All() []mcp.JSONRPCNotification {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]mcp.JSONRPCNotification(nil), l.notes...)
}

// Len is how many notifications have arrived.
func (l *NoteLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.notes)
}

// Await waits, failing the test after Wait, for a notification at or
// after index from for which match holds, and returns its index.
func (l *NoteLog) Await(t testing.TB, what string, from int, match func(mcp.JSONRPCNotification) bool) int {
	t.Helper()
	timeout := time.After(Wait)
	for {
		l.mu.Lock()
		for i := from; i < len(l.notes); i++ {
			if match(l.notes[i]) {
				l.mu.Unlock()
				return i
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-timeout:
			t.Fatalf("no notification %s; got %v", what, l.methods())
		}
	}
}

// Method matches a notification by method.
func Method(method string) func(mcp.JSONRPCNotification) bool {
	return func(n mcp.JSONRPCNotification) bool { return n.Method == method }
}

// Count is how many of notes have the given method.
func Count(notes []mcp.JSONRPCNotification, method string) int {
	n := 0
	for _, note := range notes {
		if note.Method == method {
			n++
		}
	}
	return n
}

func (l *NoteLog) methods() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range l.notes {
		out = append(out, n.Method)
	}
	return out
}

// StartLabDirect starts a labserver with env (KEY=VALUE) under a stdio MCP
// client of the test's own, with no mcpmux in between, and initializes it
// with protocol 2025-11-25: what the child itself sends, to compare with
// what arrives through mcpmux. It is closed at cleanup.
func StartLabDirect(t testing.TB, env ...string) *client.Client {
	t.Helper()
	_, bin := Binaries(t)
	c, err := client.NewStdioMCPClient(bin, append(env, "LAB_NOTES="+filepath.Join(t.TempDir(), "notes")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpmux-test-direct", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize the labserver: %v", err)
	}
	return c
}
