package child

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// transportDelivers is what mcp-go's stdio transport (readResponses) makes of one
// line from a child: whether it is a response, and its id, result and
// whether it has an error.
func transportDelivers(line []byte) (id string, result json.RawMessage, hasError, ok bool) {
	line = bytes.TrimRight(line, "\r\n")
	var base struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *mcp.RequestId `json:"id,omitempty"`
		Method  string         `json:"method,omitempty"`
	}
	if json.Unmarshal(line, &base) != nil {
		return "", nil, false, false
	}
	if base.Method != "" {
		if base.ID == nil {
			return "", nil, false, false // a notification
		}
		var req transport.JSONRPCRequest
		if json.Unmarshal(line, &req) == nil {
			return "", nil, false, false // a request
		}
	}
	var resp transport.JSONRPCResponse
	if json.Unmarshal(line, &resp) != nil {
		return "", nil, false, false
	}
	return resp.ID.String(), resp.Result, resp.Error != nil, true
}

// FuzzAnswerPark checks that what answerPark hands mcp-go's transport, with
// the parked results put back, is what the transport would have delivered
// from the child's own lines: every line passes unchanged, or is a response
// to a request waited for whose result is parked whole and whose stand-in
// is delivered as a response under the same id with no error.
func FuzzAnswerPark(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-1","result":{"content":[{"type":"text","text":"hi"}]}}`+"\n"), uint8(7))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-2","result":{}, "error":{"code":1,"message":"x"}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`+"\n"+`{"id":"mcpmux-1","jsonrpc":"2.0","result":{"a":1}}`), uint8(0))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-1","Result":{},"result":{}}`+"\n"+`{"jsonrpc":"2.0","id":"mcpmux-1","result":{"b":[]}}`+"\r\n"), uint8(3))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-3","result":{"x":"`+strings.Repeat("y", 100)+`"}}`+"\n"), uint8(200))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-3","result":{"x":"`+strings.Repeat("y", 300)+`"}}`+"\n"+`{"jsonrpc":"2.0","id":"mcpmux-1","result":{}}`+"\n"), uint8(2))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"mcpmux-2","result":{"x":"`+strings.Repeat("y", 300)+`"}}`+"\n"+`{"jsonrpc":"2.0","id":"mcpmux-2","result":{}}`+"\n"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		// The sizes scaled down (the smallest read buffer bufio allows), so
		// that small inputs take every path: a line within the buffer,
		// gathered past it, and streamed past max.
		a := &answerPark{br: bufio.NewReaderSize(bytes.NewReader(data), 16), max: 256}
		a.min = int(chunk%2) * 32 // any size, or only longer lines
		if chunk%4 >= 2 {
			a.min, a.max = 0, 1 // what is longer than the read buffer is never parked
		}
		slots := map[string]*parkSlot{}
		for _, id := range []string{"mcpmux-1", "mcpmux-2", "mcpmux-3"} {
			slots["string:"+id] = a.expect(`"` + id + `"`) // keyed as the transport keys them
		}
		var got bytes.Buffer
		buf := make([]byte, int(chunk)%64+1)
		for {
			n, err := a.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		in, out := testsupport.Lines(data), testsupport.Lines(got.Bytes())
		if len(in) != len(out) {
			t.Fatalf("%d lines in, %d out:\n in: %q\nout: %q", len(in), len(out), short(data), short(got.Bytes()))
		}
		for i := range in {
			if bytes.Equal(in[i], out[i]) {
				continue
			}
			id, result, hasError, ok := transportDelivers(in[i])
			slot := slots[id]
			if !ok || hasError || slot == nil || slot.raw.Load() == nil {
				t.Fatalf("line %q was changed to %q, but the transport delivers (%q, %q, error %v, %v)", short(in[i]), out[i], id, short(result), hasError, ok)
			}
		}
		// Every result parked is that of a line the transport delivers as
		// an answer under its id, and what stands for the line is too.
		for id, slot := range slots {
			raw := slot.raw.Load()
			if raw == nil {
				continue
			}
			found := false
			for i := range in {
				lid, result, hasError, ok := transportDelivers(in[i])
				oid, _, oErr, oOK := transportDelivers(out[i])
				if ok && !hasError && lid == id && bytes.Equal(result, *raw) && oOK && !oErr && oid == id {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("%s: parked %q, which no line answers as such", id, short(*raw))
			}
		}
	})
}

// short is b, or its start, for a message.
func short(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}

// A line not waited for, or below the size worth parking, passes as it is.
func TestAnswerParkPassesTheRest(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":"mcpmux-9","result":{"x":"` + strings.Repeat("y", parkMin) + `"}}` + "\n"
	small := `{"jsonrpc":"2.0","id":"mcpmux-1","result":{}}` + "\n"
	a := newAnswerPark(strings.NewReader(big + small))
	slot := a.expect(`"mcpmux-1"`)
	defer a.done(`"mcpmux-1"`, slot)
	var got bytes.Buffer
	if _, err := got.ReadFrom(a); err != nil {
		t.Fatal(err)
	}
	if got.String() != big+small || slot.raw.Load() != nil {
		t.Fatalf("got %q, parked %v", got.String(), slot.raw.Load() != nil)
	}
}

// A long line leaves no more than maxKeptLine behind once it has been read,
// whatever comes after it.
func TestAnswerParkKeepsLittle(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":"mcpmux-9","result":{"x":"` + strings.Repeat("y", 3<<20) + `"}}` + "\n"
	small := `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}` + "\n"
	for name, src := range map[string]string{
		"parked":   big + strings.Repeat(small, 3),
		"streamed": `{"jsonrpc":"2.0","id":"mcpmux-8","result":{"x":"` + strings.Repeat("y", parkMax) + `"}}` + "\n" + small,
	} {
		a := newAnswerPark(strings.NewReader(src))
		slot := a.expect(`"mcpmux-9"`)
		var got bytes.Buffer
		if _, err := got.ReadFrom(a); err != nil {
			t.Fatal(err)
		}
		a.done(`"mcpmux-9"`, slot)
		if c := cap(a.long); c > maxKeptLine {
			t.Errorf("%s: %d bytes kept after the long line, want at most %d", name, c, maxKeptLine)
		}
	}
}
