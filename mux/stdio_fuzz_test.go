package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

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
		// answered when the session ends, or not; each in testsupport.RefKey's
		// form.
		want := map[string]int{}
		listens := map[string]bool{}
		// A request the client cancelled may go unanswered.
		cancelled := map[string]int{}
		for _, line := range testsupport.Lines(data) {
			if target, ok := testsupport.RefCancelled(line); ok {
				if id, ok := testsupport.RefKey(target); ok {
					cancelled[id]++
				}
			}
			ref, ok := testsupport.RefEdge(line, true)
			if !ok {
				return // an id the reference cannot compare
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
			}
			if ref.Refused || json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
				continue // refused ones are answered under a null id
			}
			// What mcp-go is handed counts as a request as the line does: a
			// carried id is handed on as a stand-in, a plain integer.
			_, request := testsupport.RefRequestID(line)
			if !request && ref.Carried {
				_, request = testsupport.RefRequestID(withStandIn(line))
			}
			id, ok := testsupport.RefKey(msg.ID)
			switch {
			case request:
				if !ok {
					t.Fatalf("request %q has an id the reference cannot read", line)
				}
				want[id]++
			case ok && msg.Method != nil && *msg.Method == string(mcp.MethodSubscriptionsListen):
				listens[id] = true
			}
		}
		got := map[string]int{}
		for _, line := range testsupport.Lines(out.Bytes()) {
			if line[len(line)-1] != '\n' {
				t.Fatalf("output line %q does not end with a newline", line)
			}
			id, isResponse := checkMessage(t, line)
			if !isResponse {
				continue
			}
			if string(id) == "null" {
				if answered(line) {
					t.Fatalf("%q has a null id but counts as an answer", line)
				}
				continue
			}
			if (jsonwire.PlainInteger(id) || jsonwire.PlainIDJSON(id)) && !answered(line) {
				t.Fatalf("the answer %q is not counted as one", line)
			}
			if cut := cutShort(line); cut != "" && !bytes.Contains(data, []byte(mcp.MethodNotificationCancelled)) &&
				!bytes.Contains(data, []byte(cut)) {
				t.Fatalf("the input ended, and mcpmux cut a call short: %q", line)
			}
			cid, ok := testsupport.RefKey(id)
			if !ok {
				t.Fatalf("the answer %q has an id the reference cannot read", line)
			}
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

// answered reports whether msg is an answer with an id, as a client reads
// it.
func answered(msg []byte) bool {
	_, ok := testsupport.RefAnswerID(msg)
	return ok
}

// withStandIn is line with every member mcp-go may read as its id set to
// -1, the form of the stand-in the edge hands mcp-go for a carried id.
func withStandIn(line []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(line, &top) != nil {
		return line
	}
	for k := range top {
		if strings.EqualFold(k, "id") {
			top[k] = json.RawMessage("-1")
		}
	}
	b, err := json.Marshal(top)
	if err != nil {
		return line
	}
	return b
}
