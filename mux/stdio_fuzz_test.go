package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// lines splits a client's input the way requestReader reads it: each line
// with its newline, the last one possibly without.
func lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

// FuzzFraming checks the stdio drain's framing on its own: requestReader
// hands every byte on unchanged however it is read, counts exactly the lines
// isRequest accepts (requestID deciding as mcp-go's own decoding would), and
// the answers mcp-go would write for them are messages isAnswer counts, so
// that the count comes back to zero.
func FuzzFraming(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__b"}}`+"\n"), uint8(0))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":"x","method":"ping"}`), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		h := &halfClose{idle: make(chan struct{}, 1), ctx: context.Background(), log: zerolog.Nop()}
		r := h.reader(bytes.NewReader(data))
		// Reads of every size, down to one byte, as a pipe may deliver them.
		buf := make([]byte, int(chunk)%64+1)
		var got bytes.Buffer
		for {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
		}
		// A last line may get the newline mcp-go needs to read it.
		if !bytes.Equal(got.Bytes(), data) && (bytes.HasSuffix(data, []byte("\n")) || !bytes.Equal(got.Bytes(), append(data, '\n'))) {
			t.Fatalf("requestReader changed the input:\n in: %q\nout: %q", data, got.Bytes())
		}
		var answers [][]byte
		want := int64(0)
		for _, line := range lines(data) {
			id, ok := requestID(line)
			if refID, refOK := requestIDAsMCPGo(line); id != refID || ok != refOK {
				t.Fatalf("requestID(%q) = %s, %v; decoded as mcp-go does: %s, %v", line, id, ok, refID, refOK)
			}
			if !ok {
				continue
			}
			want++
			var msg struct {
				ID mcp.RequestId `json:"id"`
			}
			if err := json.Unmarshal(line, &msg); err != nil || msg.ID.IsNil() {
				// An mcp.RequestId cannot hold this id (an object, an
				// array, a bool); mcp-go answers it from an any, which
				// FuzzStdioFrames covers.
				continue
			}
			for i, a := range []any{
				mcp.NewJSONRPCResultResponse(msg.ID, mcp.EmptyResult{}),
				mcp.NewJSONRPCError(msg.ID, mcp.INVALID_PARAMS, "bad", nil),
			} {
				b, err := json.Marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				b = append(b, '\n')
				if !isAnswer(b) {
					t.Fatalf("mcp-go's answer %s to %q is not counted as an answer", b, line)
				}
				if i == 0 {
					answers = append(answers, b)
				}
			}
		}
		if p := h.pending.Load(); p != want {
			t.Fatalf("%d requests counted, want %d", p, want)
		}
		w := h.writer(io.Discard)
		for _, a := range answers {
			if _, err := w.Write(a); err != nil {
				t.Fatal(err)
			}
		}
		if p, left := h.pending.Load(), want-int64(len(answers)); p != left {
			t.Fatalf("%d requests pending after %d answers to %d requests", p, len(answers), want)
		}
	})
}

// canonicalID returns a JSON-RPC id in one form for all the ways mcp-go
// writes it back: decoded as an any, or as an mcp.RequestId, which turns a
// whole number into an int64 (so -0 comes back as 0).
func canonicalID(raw json.RawMessage) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) < 1<<63 {
		v = int64(f)
	}
	b, err := json.Marshal(v)
	return string(b), err == nil
}

// FuzzStdioFrames sends a client's stdin, one or more lines, through
// ServeStdio to a Mux with a ready child, and checks what comes out: every
// line is one well-formed JSON-RPC message, and every request read is
// answered exactly once under its own id before ServeStdio returns, and
// none cut short, unless the input cancels it (the drain's promise when a
// client closes stdin after its last request).
func FuzzStdioFrames(f *testing.F) {
	m := startFuzzLab(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		// Inputs are whole streams; ones too large to be useful frames only
		// slow the fuzzer down (the size limits have their own tests).
		if len(data) > 1<<20 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out testsupport.SyncBuffer
		if err := m.ServeStdio(ctx, fuzzIdentity, bytes.NewReader(data), &out); err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatal("ServeStdio did not return when its input ended")
		}

		// The ids of the requests, and of the listening streams, which may be
		// answered when the session ends, or not.
		want := map[string]int{}
		listens := map[string]bool{}
		// A request the client cancelled may go unanswered.
		cancelled := map[string]int{}
		for _, line := range lines(data) {
			if id, ok := cancelledID(line); ok {
				cancelled[id]++
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
			}
			if json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
				continue
			}
			id, ok := canonicalID(msg.ID)
			switch {
			case isRequest(line):
				if !ok {
					t.Fatalf("request %q has an id mcp-go cannot read", line)
				}
				want[id]++
			case ok && msg.Method != nil && *msg.Method == string(mcp.MethodSubscriptionsListen):
				listens[id] = true
			}
		}
		got := map[string]int{}
		for _, line := range lines(out.Bytes()) {
			if line[len(line)-1] != '\n' {
				t.Fatalf("output line %q does not end with a newline", line)
			}
			id, isResponse := checkMessage(t, line)
			if !isResponse {
				continue
			}
			if string(id) == "null" {
				if isAnswer(line) {
					t.Fatalf("%q has a null id but counts as an answer", line)
				}
				continue
			}
			if !isAnswer(line) {
				t.Fatalf("the answer %q is not counted as one", line)
			}
			if cut := cutShort(line); cut != "" && !bytes.Contains(data, []byte(mcp.MethodNotificationCancelled)) &&
				!bytes.Contains(data, []byte(cut)) {
				t.Fatalf("the input ended, and mcpmux cut a call short: %q", line)
			}
			cid, _ := canonicalID(id)
			if listens[cid] && want[cid] == got[cid] {
				continue
			}
			got[cid]++
			if got[cid] > want[cid] {
				t.Fatalf("answer %q to no request of the input (requests: %v)", line, want)
			}
		}
		for id, n := range want {
			if got[id] > n || got[id] < n-cancelled[id] {
				t.Fatalf("%d requests with id %s (%d cancellations) got %d answers", n, id, cancelled[id], got[id])
			}
		}
	})
}

// cutShort returns the words of an answer that says its call was cancelled,
// or "".
func cutShort(answer []byte) string {
	for _, words := range []string{"cancelled by the client", "the lab tool was cancelled"} {
		if bytes.Contains(answer, []byte(words)) {
			return words
		}
	}
	return ""
}

// checkMessage fails t unless msg is one well-formed JSON-RPC 2.0 message
// from a server: a request or notification, or a response with an id and
// exactly one of result and error (an error with a code and a message). It
// returns a response's id.
func checkMessage(t *testing.T, msg []byte) (id json.RawMessage, isResponse bool) {
	t.Helper()
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    *int    `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.JSONRPC != "2.0" {
		t.Fatalf("%q is not a JSON-RPC message: %v", msg, err)
	}
	switch {
	case m.Method != "":
		if m.Result != nil || m.Error != nil {
			t.Fatalf("%q is neither a request nor a notification", msg)
		}
		return nil, false
	case len(m.ID) == 0 || (m.Result == nil) == (m.Error == nil):
		t.Fatalf("%q is not a response", msg)
	case m.Error != nil && (m.Error.Code == nil || m.Error.Message == nil):
		t.Fatalf("%q has an error without code and message", msg)
	}
	return m.ID, true
}
