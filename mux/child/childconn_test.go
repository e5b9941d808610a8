package child

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// connIDs are the requests sent to both transports before the child's
// lines come: mcpmux's own ids, and ids of the kinds mcp-go's client uses.
var connIDs = []mcp.RequestId{
	mcp.NewRequestId("mcpmux-1"), mcp.NewRequestId("mcpmux-2"), mcp.NewRequestId("mcpmux-3"),
	mcp.NewRequestId(int64(1)), mcp.NewRequestId("1"), mcp.NewRequestId("a b"),
}

// connOutcome is everything a transport delivered from one stream of a
// child's lines: each request's answer (or its failure), the notifications
// in order, and the child's requests, with what the transport wrote back to
// them, in any order.
type connOutcome struct {
	answers  []string
	notes    []string
	requests []string
	written  []string
}

// recordStdin is a child's stdin that keeps each message written, and
// tells of it. Messages written at once by several callers may come in one
// write (childConn coalesces them), so a write is split into its lines.
type recordStdin struct {
	mu     sync.Mutex
	writes []string // one message (line) each
	wrote  chan struct{}
}

func (r *recordStdin) Write(p []byte) (int, error) {
	lines := testsupport.Lines(p)
	r.mu.Lock()
	for _, line := range lines {
		r.writes = append(r.writes, string(line))
	}
	r.mu.Unlock()
	for range lines {
		r.wrote <- struct{}{}
	}
	return len(p), nil
}

func (r *recordStdin) Close() error { return nil }

// waitN waits for n signals on ch, failing t after testsupport.Wait.
func waitN(t *testing.T, ch <-chan struct{}, n int, what string) {
	t.Helper()
	timer := time.NewTimer(testsupport.Wait)
	defer timer.Stop()
	for range n {
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// childRequests is how many lines of data mcp-go's stdio transport takes
// for requests from the child (its readResponses): what the test waits for.
func childRequests(data []byte) int {
	n := 0
	for _, line := range testsupport.Lines(data) {
		if !bytes.HasSuffix(line, []byte("\n")) {
			break // never read whole
		}
		var base struct {
			ID     *mcp.RequestId `json:"id,omitempty"`
			Method string         `json:"method,omitempty"`
		}
		if json.Unmarshal(bytes.TrimRight(line, "\r\n"), &base) != nil || base.Method == "" || base.ID == nil {
			continue
		}
		var req transport.JSONRPCRequest
		if json.Unmarshal(bytes.TrimRight(line, "\r\n"), &req) == nil {
			n++
		}
	}
	return n
}

// runConn sends connIDs on the transport mk makes, then has the child write
// data and end its stdout, and returns what the transport delivered.
func runConn(t *testing.T, data []byte, mk func(stdout io.Reader, stdin io.WriteCloser) transport.BidirectionalInterface) connOutcome {
	t.Helper()
	stdout, child := io.Pipe()
	stdin := &recordStdin{wrote: make(chan struct{}, 1024)}
	tr := mk(stdout, stdin)
	var out connOutcome
	var mu sync.Mutex
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		b, _ := json.Marshal(n)
		out.notes = append(out.notes, string(b))
	})
	handled := make(chan struct{}, 1024)
	tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		params, _ := json.Marshal(req.Params)
		mu.Lock()
		out.requests = append(out.requests, fmt.Sprintf("%s %s %s", req.ID.String(), req.Method, params))
		mu.Unlock()
		defer func() { handled <- struct{}{} }()
		if req.Method == "fail" {
			return nil, fmt.Errorf("handler failed")
		}
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{"ok":true}`)), nil
	})
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	answers := make([]string, len(connIDs))
	var sent sync.WaitGroup
	for i, id := range connIDs {
		sent.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
			defer cancel()
			resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: "tools/call",
				Params: map[string]any{"name": "x<y>&z"}})
			switch {
			case err != nil:
				answers[i] = fmt.Sprintf("%s failed: %v", id.String(), err)
			default:
				e, _ := json.Marshal(resp.Error)
				answers[i] = fmt.Sprintf("%s %s %s result %q error %s", id.String(), resp.JSONRPC, resp.ID.String(), resp.Result, e)
			}
		})
	}
	waitN(t, stdin.wrote, len(connIDs), "the requests to be written")
	go func() {
		_, _ = child.Write(data)
		_ = child.Close()
	}()
	sent.Wait()
	waitN(t, handled, childRequests(data), "the child's requests to be handled")
	waitN(t, stdin.wrote, childRequests(data), "the answers to the child's requests")
	_ = tr.Close()
	stdin.mu.Lock()
	out.written = slices.Clone(stdin.writes[len(connIDs):])
	requests := slices.Clone(stdin.writes[:len(connIDs)])
	stdin.mu.Unlock()
	slices.Sort(requests)
	slices.Sort(out.requests)
	slices.Sort(out.written)
	out.answers = append(answers, requests...)
	return out
}

// FuzzChildConn holds childConn beside mcp-go's own stdio transport: from
// the same lines of a child, with the same requests waiting, both deliver
// the same answers, notifications and child requests, and write the same
// bytes, so that the day mcp-go's transport reads a child otherwise, this
// fails.
func FuzzChildConn(f *testing.F) {
	ok := `{"jsonrpc":"2.0","id":"mcpmux-1","result":{"content":[{"type":"text","text":"hi"}]}}` + "\n"
	for _, seed := range []string{
		ok,
		ok + ok, // twice: the first is kept
		`{"jsonrpc":"2.0","id":"mcpmux-2","result":{},"error":{"code":1,"message":"x"}}` + "\n",
		`{"jsonrpc":"2.0","id":"mcpmux-2","error":{"code":-32602,"message":"no","data":{"a":1}}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcpmux-1","progress":1}}` + "\n" + ok,
		`{"jsonrpc":"2.0","id":"mcpmux-1","Result":{},"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"mcpmux-1","result":{"b":[]}}` + "\r\n",
		`{"jsonrpc":"2.0","ID":"mcpmux-3","result":{"x":1}}` + "\n",
		`{"jsonrpc":"2.0","id":"mcpmux\u002d3","result":{"x":1}}` + "\n",
		`{"jsonrpc":"2.0","id":"mcpmux-3","result":{"x":1},"id":"mcpmux-2"}` + "\n",
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}` + "\n" + `{"jsonrpc":"2.0","id":"1","result":{"s":1}}` + "\n",
		`{"jsonrpc":"2.0","id":1.0,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":"a b","result":{"sp":1}}` + "\n",
		`{"jsonrpc":"2.0","id":"mcpmux-1","result":null}` + "\n" + `{"jsonrpc":"2.0","id":"mcpmux-2","result":[1]}` + "\n" +
			`{"jsonrpc":"2.0","id":"mcpmux-3"}` + "\n",
		`{"jsonrpc":1,"id":"mcpmux-1","result":{}}` + "\n" + `{"jsonrpc":"1.0","id":"mcpmux-2","result":{}}` + "\n" +
			`{"id":"mcpmux-3","result":{}}` + "\n",
		`not json` + "\n" + `{"jsonrpc":"2.0","id":"mcpmux-1","result":{}` + "\n" + "\x00\n" + ok,
		`{"jsonrpc":"2.0","id":"r1","method":"roots/list"}` + "\n" + `{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"a":"<b>"}}` + "\n",
		`{"jsonrpc":"2.0","id":"r2","method":"fail"}` + "\n" + `{"jsonrpc":"2.0","id":null,"method":"notifications/message","params":{"level":"info"}}` + "\n",
		`{"jsonrpc":"2.0","id":"mcpmux-1","method":"roots/list","result":{}}` + "\n" + `{"jsonrpc":"2.0","id":{},"method":"x"}` + "\n",
		`{"jsonrpc":"2.0","method":7}` + "\n" + `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n",
		`{"jsonrpc":"2.0","id":"mcpmux-2","result":{"x":"` + strings.Repeat("y", 100<<10) + `"}}` + "\n" + ok,
		`{"jsonrpc":"2.0","id":"mcpmux-1","result":{"text":"\xff\u00e9"}}` + "\n",
		ok + `{"jsonrpc":"2.0","id":"mcpmux-2","result":{}}`, // the last line never ends
		"\n\r\n " + "\n" + `[{"jsonrpc":"2.0","id":"mcpmux-1","result":{}}]` + "\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		theirs := runConn(t, data, func(stdout io.Reader, stdin io.WriteCloser) transport.BidirectionalInterface {
			return transport.NewIO(stdout, stdin, nil)
		})
		var wg sync.WaitGroup
		ours := runConn(t, data, func(stdout io.Reader, stdin io.WriteCloser) transport.BidirectionalInterface {
			return newChildConn(stdout, stdin, &wg, zerolog.Nop())
		})
		wg.Wait()
		for _, part := range []struct {
			what         string
			theirs, ours []string
		}{
			{"answers", theirs.answers, ours.answers},
			{"notifications", theirs.notes, ours.notes},
			{"child requests", theirs.requests, ours.requests},
			{"answers to the child", theirs.written, ours.written},
		} {
			if !slices.Equal(part.theirs, part.ours) {
				t.Errorf("%s differ for %q:\nmcp-go:   %q\nchildConn: %q", part.what, short(data), part.theirs, part.ours)
			}
		}
	})
}

// FuzzRequestLine checks that the request line childConn writes for a
// tools/call is, byte for byte, what json.Marshal writes of it.
func FuzzRequestLine(f *testing.F) {
	for _, args := range []string{
		`{"text":"hello"}`, `{"text":"hello world"}`, `{ "text" : "a" }`, "{\"a\":\n1}", `{"h":"<b>&amp;</b>"}`,
		`{"u":"\u2028 \u00e9 ` + "\u2028\u2029\u20ac\u00e9" + `"}`, `{"e":"\"quoted\" \\ back\\slash"}`, `{"n":[1,2.5e3,-0,true,null,{}]}`,
		`{"x":"` + "\xff" + `"}`, `{"a":1`, `[]`, `"s"`, `{"a":"\\"}`, `{"k\"":"v"}`,
	} {
		f.Add(args, "echo", "mcpmux-7", false)
		f.Add(args, "a<b", "mcpmux-8", true)
	}
	f.Fuzz(func(t *testing.T, args, name, id string, withMeta bool) {
		p := callParams{CallToolParams: mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}}
		if withMeta {
			p.meta = json.RawMessage(`{"progressToken":"` + id + `"}`)
		}
		req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Method: "tools/call", Params: p}
		want, wantErr := json.Marshal(req)
		got, err := requestLine(req)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("requestLine: %v, json.Marshal: %v", err, wantErr)
		}
		if err == nil && string(got) != string(want)+"\n" {
			t.Fatalf("requestLine wrote\n%q\njson.Marshal\n%q", got, want)
		}
	})
}
