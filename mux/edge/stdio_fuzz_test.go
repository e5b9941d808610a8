package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/edge/reqid"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// FuzzFraming checks the stdio drain's framing on its own: requestReader
// hands every byte on unchanged however it is read, but for the lines the
// edge refuses for their ids (testsupport.RefEdge; and a second request under the id
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
		live := map[string]bool{}  // every request counted, by testsupport.RefKey
		stood := map[string]bool{} // those handed on under a stand-in
		for _, line := range testsupport.Lines(data) {
			id, ok := reqid.RequestID(line)
			if refID, refOK := testsupport.RefRequestID(line); id != refID || ok != refOK {
				t.Fatalf("RequestID(%q) = %s, %v; decoded as mcp-go does: %s, %v", line, id, ok, refID, refOK)
			}
			ref, ok := testsupport.RefEdge(line, false)
			if !ok {
				return // an id the reference cannot compare
			}
			if v := reqid.Read(line); (v.Kind == reqid.BadType || v.Kind == reqid.Null) != ref.Refused || (v.Kind == reqid.Request) != ref.Request ||
				v.Kind == reqid.Request && v.Carried != ref.Carried {
				t.Fatalf("Read(%q) = %+v; the reference reads %+v", line, v, ref)
			}
			if ref.Refused || ref.Request && live[ref.Key] {
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
				v, w := reqid.Read(line), reqid.Read(o)
				carriedID := ref.Carried && w.At.End > 0 && o[w.At.Start] == '-' &&
					bytes.Equal(jsonwire.WithValue(want, v.At, o[w.At.Start:w.At.End]), o)
				// A cancellation of a carried request names its stand-in.
				at, isCancel := reqid.CancelTarget(line)
				oat, _ := reqid.CancelTarget(o)
				named, known := "", false
				if isCancel {
					named, known = testsupport.RefKey(line[at.Start:at.End])
				}
				standIn := isCancel && known && stood[named] && oat.End > 0 && o[oat.Start] == '-' &&
					bytes.Equal(jsonwire.WithValue(want, at, o[oat.Start:oat.End]), o)
				if !carriedID && !standIn {
					t.Fatalf("requestReader changed %q to %q", line, o)
				}
			}
			if _, ok := reqid.RequestID(o); ok && ref.Request {
				live[ref.Key] = true
				stood[ref.Key] = ref.Carried
			}
			handed = append(handed, o)
		}
		if len(out) != 0 {
			t.Fatalf("requestReader added %q", out)
		}
		var answers [][]byte
		want := int64(0)
		for _, line := range handed {
			if _, ok := reqid.RequestID(line); !ok {
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
