package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// edgeRef is what the stdio edge does with a client's line, read with
// encoding/json (as mcp-go reads it): the reference readMsgID is held to.
type edgeRef struct {
	refused bool // answered at the edge under a null id, never handed on
	request bool // a request whose id the edge checks
	carried bool // its id (a request's, or an answer's) is not one mcp-go writes back as written
	key     string
}

// refEdge reads line as the edge must, with a front end (front) or
// without; ok is false for an id the reference cannot compare exactly (a
// number with a huge exponent). The front end refuses, under a null id, a
// message whose members decoders would read differently (package frame).
func refEdge(line []byte, front bool) (r edgeRef, ok bool) {
	if f := frame.Read(line); front && f.Refused != nil && f.Kind != frame.Notification {
		return edgeRef{refused: true}, true
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
		return r, true
	}
	notNull := func(v json.RawMessage) bool { return len(v) > 0 && string(v) != "null" }
	if m.Method == nil && (notNull(m.Result) || notNull(m.Error)) {
		// The client's answer: its number or string id carried all the
		// same, where mcp-go answers it.
		c := m.ID[0]
		r.carried = (c == '"' || c == '-' || c >= '0' && c <= '9') && !jsonwire.PlainInteger(m.ID) && !jsonwire.PlainIDJSON(m.ID)
		return r, true
	}
	switch m.ID[0] {
	case 'n':
		var method string
		if m.Method == nil || json.Unmarshal(m.Method, &method) == nil && strings.HasPrefix(method, "notifications/") {
			return r, true
		}
		return edgeRef{refused: true}, true
	case '{', '[', 't', 'f':
		return edgeRef{refused: true}, true
	}
	key, ok := refKey(m.ID)
	return edgeRef{request: true, carried: !jsonwire.PlainInteger(m.ID) && !jsonwire.PlainIDJSON(m.ID), key: key}, ok
}

// refKey is a string or number id's value in one exact form (big.Rat for a
// number); ok is false for one it will not work out.
func refKey(id json.RawMessage) (string, bool) {
	if id[0] == '"' {
		var s string
		return "s:" + s, json.Unmarshal(id, &s) == nil
	}
	if i := bytes.IndexAny(id, "eE"); i >= 0 {
		if e, err := strconv.Atoi(string(id[i+1:])); err != nil || e > 1000 || e < -1000 {
			return "", false
		}
	}
	var r big.Rat
	if _, ok := r.SetString(string(id)); !ok {
		return "", false
	}
	return "n:" + r.RatString(), true
}

// FuzzFraming checks the stdio drain's framing on its own: requestReader
// hands every byte on unchanged however it is read, but for the lines the
// edge refuses for their ids (refEdge; and a second request under the id
// of one in flight, here every request counted, none being answered),
// which it drops, and the ids it carries, which it replaces by a stand-in;
// it counts exactly the lines isRequest accepts of what it hands on
// (requestID deciding as mcp-go's own decoding would), and the answers
// mcp-go would write for them are messages isAnswer counts, so that the
// count comes back to zero.
func FuzzFraming(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a__b"}}`+"\n"), uint8(0))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":"x","method":"ping"}`), uint8(3))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"ping"}`+"\n"+`{"jsonrpc":"2.0","id":7.0,"method":"ping"}`+"\n"+`{"jsonrpc":"2.0","id":-7,"method":"ping"}`+"\n"), uint8(5))
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
		out := testsupport.Lines(got.Bytes())
		var handed [][]byte
		live := map[string]bool{}  // every request counted, by refKey
		stood := map[string]bool{} // those handed on under a stand-in
		for _, line := range testsupport.Lines(data) {
			id, ok := requestID(line)
			if refID, refOK := requestIDAsMCPGo(line); id != refID || ok != refOK {
				t.Fatalf("requestID(%q) = %s, %v; decoded as mcp-go does: %s, %v", line, id, ok, refID, refOK)
			}
			ref, ok := refEdge(line, false)
			if !ok {
				return // an id the reference cannot compare
			}
			if v := readMsgID(line); (v.kind == idBadType || v.kind == idNull) != ref.refused || (v.kind == idRequest) != ref.request ||
				v.kind == idRequest && v.carried != ref.carried {
				t.Fatalf("readMsgID(%q) = %+v; the reference reads %+v", line, v, ref)
			}
			if ref.refused || ref.request && live[ref.key] {
				continue // dropped
			}
			if len(out) == 0 {
				t.Fatalf("requestReader dropped %q", line)
			}
			o := out[0]
			out = out[1:]
			want := line
			if !bytes.HasSuffix(want, []byte("\n")) {
				want = append(bytes.Clone(want), '\n')
			}
			if !bytes.Equal(o, want) {
				v, w := readMsgID(line), readMsgID(o)
				carriedID := ref.carried && w.at.End > 0 && o[w.at.Start] == '-' &&
					bytes.Equal(jsonwire.WithValue(want, v.at, o[w.at.Start:w.at.End]), o)
				// A cancellation of a carried request names its stand-in.
				at, isCancel := cancelTarget(line)
				oat, _ := cancelTarget(o)
				named, known := "", false
				if isCancel {
					named, known = refKey(line[at.Start:at.End])
				}
				standIn := isCancel && known && stood[named] && oat.End > 0 && o[oat.Start] == '-' &&
					bytes.Equal(jsonwire.WithValue(want, at, o[oat.Start:oat.End]), o)
				if !carriedID && !standIn {
					t.Fatalf("requestReader changed %q to %q", line, o)
				}
			}
			if _, ok := requestID(o); ok && ref.request {
				live[ref.key] = true
				stood[ref.key] = ref.carried
			}
			handed = append(handed, o)
		}
		if len(out) != 0 {
			t.Fatalf("requestReader added %q", out)
		}
		var answers [][]byte
		want := int64(0)
		for _, line := range handed {
			if _, ok := requestID(line); !ok {
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
		// answered when the session ends, or not; each in refKey's form.
		want := map[string]int{}
		listens := map[string]bool{}
		// A request the client cancelled may go unanswered.
		cancelled := map[string]int{}
		for _, line := range testsupport.Lines(data) {
			if at, ok := cancelTarget(line); ok {
				if id, ok := refKey(line[at.Start:at.End]); ok {
					cancelled[id]++
				}
			}
			ref, ok := refEdge(line, true)
			if !ok {
				return // an id the reference cannot compare
			}
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method *string         `json:"method"`
			}
			if ref.refused || json.Unmarshal(line, &msg) != nil || len(msg.ID) == 0 {
				continue // refused ones are answered under a null id
			}
			// What mcp-go is handed: a carried id as a stand-in.
			handed := line
			if ref.carried {
				handed = jsonwire.WithValue(line, readMsgID(line).at, []byte("-1"))
				if !isRequest(handed) {
					handed = line
				}
			}
			id, ok := refKey(msg.ID)
			switch {
			case isRequest(handed):
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
				if isAnswer(line) {
					t.Fatalf("%q has a null id but counts as an answer", line)
				}
				continue
			}
			if (jsonwire.PlainInteger(id) || jsonwire.PlainIDJSON(id)) && !isAnswer(line) {
				t.Fatalf("the answer %q is not counted as one", line)
			}
			if cut := cutShort(line); cut != "" && !bytes.Contains(data, []byte(mcp.MethodNotificationCancelled)) &&
				!bytes.Contains(data, []byte(cut)) {
				t.Fatalf("the input ended, and mcpmux cut a call short: %q", line)
			}
			cid, ok := refKey(id)
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
