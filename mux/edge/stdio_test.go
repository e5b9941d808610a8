package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/edge/reqid"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

func TestMessageKinds(t *testing.T) {
	cases := []struct {
		msg             string
		request, answer bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, true, false},
		{`{"jsonrpc":"2.0","method":"tools/call","id":"a"}`, true, false},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, false},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, false, false},
		{`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen"}`, false, false},
		{`{"jsonrpc":"2.0","id":8,"method":""}`, true, false}, // answered with an error, so counted
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, false, true},
		// mcp-go answers a client's error response with "method not found".
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"m"}}`, true, true},
		{`{"jsonrpc":"2.0","id":2,"method":"ping","result":{}}`, false, false}, // an answer to mcp-go
		{`{"id":{}}`, true, false}, // refused: no jsonrpc
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, false, false},
		{`{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`, true, false},
		{`{"result":{},"jsonrpc":"2.0","id":4}`, false, false}, // id after result: not mcp-go's shape
		{`not json`, false, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, false, false},
		// Fields match in any case, the last of duplicates winning.
		{`{"JSONRPC":"2.0","Id":5,"Method":"ping"}`, true, false},
		{`{"jsonrpc":"2.0","id":6,"result":{},"Result":null}`, true, true},
		{`{"jsonrpc":"2.0","id":7,"method":"subscriptions\/listen"}`, false, false},
		// What mcp-go cannot decode it answers with a null id.
		{`{"jsonrpc":"1.0","id":9,"result":[1e400]}`, false, true},
		{`{"jsonrpc":"1.0","id":9,"params":[1e400]}`, true, false}, // params is not decoded
		{`{"jsonrpc":"2.0","id":10,"method":7}`, false, false},
		{`{"jsonrpc":2,"id":11,"method":"ping"}`, false, false},
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, false, false},
		{`{"jsonrpc":"2.0","id":12,"method":"` + strings.Repeat("m", 200) + `"}`, true, false},
	}
	for _, c := range cases {
		if got := isRequest([]byte(c.msg)); got != c.request {
			t.Errorf("isRequest(%s) = %v", c.msg, got)
		}
		if _, ok := testsupport.RefRequestID([]byte(c.msg)); ok != c.request {
			t.Errorf("mcp-go's decoding of %s disagrees with the case", c.msg)
		}
		if got := isAnswer([]byte(c.msg + "\n")); got != c.answer {
			t.Errorf("isAnswer(%s) = %v", c.msg, got)
		}
	}
}

// isRequest reports whether mcp-go answers line under its id.
func isRequest(line []byte) bool {
	_, ok := reqid.RequestID(line)
	return ok
}

// isAnswer reports whether msg is a response with an id.
func isAnswer(msg []byte) bool {
	_, ok := answerID(msg)
	return ok
}

// A client line over the limit is never handed on: it is read to its end,
// dropped, logged and answered (under its id when its start tells it), and
// the lines around it go through unchanged and counted.
func TestRequestReaderLimit(t *testing.T) {
	const max = 100
	fits := `{"jsonrpc":"2.0","id":1,"method":"ping","x":"` + strings.Repeat("a", max-47) + `"}`
	if len(fits) != max {
		t.Fatalf("test line is %d bytes", len(fits))
	}
	big := strings.Repeat("b", 200<<10) // longer than requestReader's buffer
	cases := []struct {
		name     string
		in       string
		out      string // what reaches mcp-go
		answers  []string
		requests int64
	}{
		{"short lines", "{\"id\":1,\"method\":\"a\"}\n{\"method\":\"n\"}\n", "{\"id\":1,\"method\":\"a\"}\n{\"method\":\"n\"}\n", nil, 1},
		{"exactly the limit", fits + "\n", fits + "\n", nil, 1},
		{"exactly the limit, no newline", fits, fits + "\n", nil, 1}, // mcp-go drops a last line without one
		{"one byte over", fits + "x\n" + `{"id":2,"method":"ping"}` + "\n", `{"id":2,"method":"ping"}` + "\n", []string{"1"}, 1},
		{"over, id first", `{"jsonrpc":"2.0","id":"r-7","method":"tools/call","params":"` + big + "\"}\n{\"id\":8,\"method\":\"ping\"}\n",
			"{\"id\":8,\"method\":\"ping\"}\n", []string{`"r-7"`}, 1},
		{"over, numeric id", `{"id":-12,"p":"` + big + "\"}\n", "", []string{"-12"}, 0},
		{"over, id after the cut", `{"p":"` + big + `","id":3}` + "\n", "", []string{"null"}, 0},
		{"over, id an object", `{"id":{"a":1},"p":"` + big + "\"}\n", "", []string{"null"}, 0},
		{"over, not JSON, at EOF", big, "", []string{"null"}, 0},
		{"two over in a row", big + "\n" + big + "\n{\"method\":\"n\"}\n", "{\"method\":\"n\"}\n", []string{"null", "null"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, chunk := range []int{1, 7, 64 << 10} {
				// A session of its own for each read: one that saw the ids
				// of the last would refuse them as in flight.
				var logBuf, answers bytes.Buffer
				h := &halfClose{idle: make(chan struct{}, 1), ctx: context.Background(), maxMessage: max, log: zerolog.New(&logBuf)}
				h.writer(&answers)
				got := testsupport.ReadAll(t, h.reader(strings.NewReader(c.in)), chunk)
				if string(got) != c.out {
					t.Fatalf("chunk %d: handed on %.200q, want %.200q", chunk, got, c.out)
				}
				if n := h.pending.Load(); n != c.requests {
					t.Errorf("chunk %d: %d requests counted, want %d", chunk, n, c.requests)
				}
				lines := strings.Split(strings.TrimSuffix(answers.String(), "\n"), "\n")
				if len(c.answers) == 0 {
					lines = nil
					if answers.Len() != 0 {
						t.Errorf("chunk %d: answered %q", chunk, answers.String())
					}
				}
				if len(lines) != len(c.answers) {
					t.Fatalf("chunk %d: answers %q, want %d", chunk, answers.String(), len(c.answers))
				}
				for i, line := range lines {
					var msg struct {
						JSONRPC string          `json:"jsonrpc"`
						ID      json.RawMessage `json:"id"`
						Error   struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"error"`
					}
					if err := json.Unmarshal([]byte(line), &msg); err != nil {
						t.Fatalf("answer %q: %v", line, err)
					}
					if string(msg.ID) != c.answers[i] || msg.JSONRPC != "2.0" || msg.Error.Code != mcp.INVALID_REQUEST ||
						msg.Error.Message != "the message exceeded max_message_bytes (100B) and was dropped" {
						t.Errorf("answer %s, want id %s and code -32600 naming the limit", line, c.answers[i])
					}
				}
				if n := strings.Count(logBuf.String(), "client sent a message over max_message_bytes"); n != len(c.answers) {
					t.Errorf("logged %d times, want %d:\n%s", n, len(c.answers), logBuf.String())
				}
			}
		})
	}
}

// slowWriter writes one byte at a time, giving way between them, so that
// writes not serialised would interleave.
type slowWriter struct{ b testsupport.SyncBuffer }

func (s *slowWriter) Write(p []byte) (int, error) {
	for i := range p {
		_, _ = s.b.Write(p[i : i+1])
		runtime.Gosched()
	}
	return len(p), nil
}

// mcpmux's own answers and mcp-go's messages never interleave.
func TestAnswerWriterWholeMessages(t *testing.T) {
	h := &halfClose{idle: make(chan struct{}, 1), ctx: context.Background(), log: zerolog.Nop()}
	var sw slowWriter
	w := h.writer(&sw)
	own := []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"mcpmux"}}` + "\n")
	theirs := []byte(`{"jsonrpc":"2.0","id":5,"result":{"from":"mcp-go"}}` + "\n")
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { h.out.writeOwn(own) })
		wg.Go(func() { _, _ = w.Write(theirs) })
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(string(sw.b.Bytes()), "\n"), "\n")
	if len(lines) != 40 {
		t.Fatalf("%d lines, want 40", len(lines))
	}
	for _, l := range lines {
		if l+"\n" != string(own) && l+"\n" != string(theirs) {
			t.Fatalf("interleaved line %q", l)
		}
	}
}

// markWriter records, as each message is written, whether the session's
// mark had been made by then.
type markWriter struct {
	marked *atomic.Bool
	seen   []bool
}

func (m *markWriter) Write(p []byte) (int, error) {
	m.seen = append(m.seen, m.marked.Load())
	return len(p), nil
}

// What AfterAnswer is given runs before the answer is written: a client
// that has read its initialize answer finds its session answered (a child's
// roots/list sent once the client's notifications/initialized is read is
// relayed, not refused).
func TestAfterAnswerRunsBeforeTheAnswerIsOut(t *testing.T) {
	h := &halfClose{idle: make(chan struct{}, 1), ctx: context.Background(), log: zerolog.Nop()}
	var marked atomic.Bool
	mw := &markWriter{marked: &marked}
	w := h.writer(mw)
	answer := []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}` + "\n")
	id, ok := answerID(answer)
	if !ok {
		t.Fatal("no answer id")
	}
	h.out.AfterAnswer(id, func([]byte) { marked.Store(true) })
	if _, err := w.Write(answer); err != nil {
		t.Fatal(err)
	}
	if len(mw.seen) == 0 || !mw.seen[0] {
		t.Fatalf("the answer was written before the session was marked answered (marked at each write: %v)", mw.seen)
	}
}

// The stdio session receives mcpmux's notifications once the answer to
// its client's initialize is written, and only if that answer is a
// result: the edge reads the initialize as it hands it to mcp-go and
// marks the session as the answer goes out.
func TestStdioSessionIsAnsweredByItsInitializeResult(t *testing.T) {
	cases := []struct {
		name, answer string
		answered     bool
	}{
		{"result", `{"jsonrpc":"2.0","id":7,"result":{"protocolVersion":"2025-11-25"}}`, true},
		{"error", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"unsupported"}}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sessions upstream.Registry
			h := &halfClose{idle: make(chan struct{}, 1), ctx: context.Background(), log: zerolog.Nop()}
			var out bytes.Buffer
			w := h.writer(&out)
			front := &stdioFront{aw: h.out}
			front.u = sessions.OpenStdio("alice", stdioOut{front})
			defer sessions.CloseStdio(front.u)
			rr := h.reader(strings.NewReader(""))
			rr.front = front
			init := []byte(`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			if handed := rr.admit(init); !bytes.Equal(handed, init) {
				t.Fatalf("initialize handed to mcp-go as %s", handed)
			}
			if front.u.Answered() {
				t.Fatal("the session was answered before its initialize answer")
			}
			if _, err := w.Write([]byte(tc.answer + "\n")); err != nil {
				t.Fatal(err)
			}
			if got := front.u.Answered(); got != tc.answered {
				t.Fatalf("after the %s answer, answered = %v, want %v", tc.name, got, tc.answered)
			}
			if !strings.Contains(out.String(), tc.answer) {
				t.Fatalf("the answer was not written: %q", out.String())
			}
		})
	}
}
