package child

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
)

// pipeChild plays a child on the far end of a stdio session: it answers
// every tools/call with the next result it is handed, verbatim.
type pipeChild struct {
	results chan []byte
	stop    chan struct{} // closed to end the child
	done    chan struct{} // closed when it has
}

// startPipeSession opens a session over mcp-go's stdio transport to a
// pipeChild, closed when tb ends.
func startPipeSession(tb testing.TB) (*Session, *pipeChild) {
	tb.Helper()
	toMux, childOut := io.Pipe()
	childIn, fromMux := io.Pipe()
	pc := &pipeChild{results: make(chan []byte), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pc.done)
		in := bufio.NewReader(childIn)
		for {
			line, err := in.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &req) != nil || req.Method != string(mcp.MethodToolsCall) {
				continue // notifications/cancelled
			}
			var result []byte
			select {
			case result = <-pc.results:
			case <-pc.stop:
				return
			}
			msg := append([]byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`), result...)
			if _, err := childOut.Write(append(msg, "}\n"...)); err != nil {
				return
			}
		}
	}()
	tr := transport.NewIO(toMux, fromMux, nil)
	if err := tr.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	sess := newSession(config.DefaultMaxMessageBytes)
	sess.tr = tr
	tb.Cleanup(func() {
		close(pc.stop)
		_ = tr.Close()
		_ = fromMux.Close()
		_ = childOut.Close()
		<-pc.done
	})
	return sess, pc
}

// FuzzCallResult hands Session.CallTool a fuzzed result from the child and
// checks that it returns a result or an error, never both or neither, and
// that a result it accepts can be sent upstream and read back by a client.
func FuzzCallResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1},"isError":false}`))
	f.Add([]byte(`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"resource","resource":{"uri":"x:/","text":"t"}}]}`))
	sess, pc := startPipeSession(f)
	f.Fuzz(func(t *testing.T, result []byte) {
		var line bytes.Buffer
		if json.Compact(&line, result) != nil {
			return // not one JSON value: the transport drops the line (see the hostile child's tests)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Handed over once CallTool has sent its request.
		go func() {
			select {
			case pc.results <- line.Bytes():
			case <-ctx.Done():
			}
		}()
		res, _, err := sess.CallTool(ctx, nil, "t", json.RawMessage(`{}`))
		if ctx.Err() != nil {
			t.Fatalf("no answer to the call: %v", err)
		}
		if (res == nil) == (err == nil) {
			t.Fatalf("CallTool returned %v and %v", res, err)
		}
		if err != nil {
			return
		}
		up, merr := json.Marshal(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(1)), res))
		if merr != nil {
			t.Fatalf("the result %s cannot be sent upstream: %v", result, merr)
		}
		var back struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(up, &back); err != nil {
			t.Fatal(err)
		}
		if _, err := mcp.ParseCallToolResult(&back.Result); err != nil {
			t.Fatalf("the result %s is sent upstream as %s, which a client cannot read: %v", result, back.Result, err)
		}
	})
}
