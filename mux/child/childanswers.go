package child

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// parkMin is the size from which an answer line of a stdio child is worth
// taking past mcp-go's transport, which decodes every line twice (once for
// its id and method, once as a response) with encoding/json.
const parkMin = 4 << 10

// answerPark sits between a stdio child's stdout (its lineReader) and
// mcp-go's transport. A line of parkMin bytes or more that is certainly the
// child's result for a request mcpmux waits for (expect) reaches mcp-go as
// the same response with an empty result, and the result itself is handed
// to the waiter by its slot, as the bytes the child wrote: mcp-go's
// transport would have handed on the same bytes (a json.RawMessage), after
// decoding them twice. Every other line passes unchanged. Only the
// transport's read goroutine reads; waiting is safe for every caller, and
// no lock is shared by the calls.
type answerPark struct {
	min, max  int // parkMin and parkMax; the tests change them
	br        *bufio.Reader
	long      []byte // a line longer than br's buffer
	streaming bool   // the rest of a line over parkMax is being handed on
	out       []byte // what is still to be handed on
	err       error  // the error after out
	waiting   sync.Map
}

// parkSlot receives the result of one request, if it was parked.
type parkSlot struct{ raw atomic.Pointer[[]byte] }

func newAnswerPark(r io.Reader) *answerPark {
	return &answerPark{min: parkMin, max: parkMax, br: bufio.NewReaderSize(r, 64<<10)}
}

// expect registers the request whose id is key (its JSON) until done is
// called with the slot it returns; the slot holds the request's parked
// result, if any, once the transport has delivered its response.
func (a *answerPark) expect(key string) *parkSlot {
	slot := &parkSlot{}
	a.waiting.Store(key, slot)
	return slot
}

// done ends expect's registration of slot under key.
func (a *answerPark) done(key string, slot *parkSlot) { a.waiting.CompareAndDelete(key, slot) }

func (a *answerPark) Read(p []byte) (int, error) {
	for len(a.out) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		a.out, a.err = a.readLine()
	}
	n := copy(p, a.out)
	a.out = a.out[n:]
	return n, nil
}

// readLine returns the next line, or what stands for it. A line longer
// than the reader's buffer is gathered in long, kept for the next one up to
// maxKeptLine; one longer than parkMax is not parked: what was gathered is
// handed on, and the rest of it as it comes, so that it is not held twice
// (mcp-go holds it too, and lineReader lets it reach max_message_bytes).
func (a *answerPark) readLine() ([]byte, error) {
	if !a.streaming && cap(a.long) > maxKeptLine {
		a.long = nil // the line it held has been read: keep no more than maxKeptLine
	}
	frag, err := a.br.ReadSlice('\n')
	if a.streaming {
		if a.streaming = errors.Is(err, bufio.ErrBufferFull); a.streaming {
			err = nil
		}
		return frag, err
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		// The common case: a line within the buffer is handed on from it
		// (valid until the next read, which waits for it to be taken).
		if len(frag) < a.min || err != nil {
			return frag, err
		}
		return a.park(frag), nil
	}
	line := append(a.long[:0], frag...)
	for errors.Is(err, bufio.ErrBufferFull) {
		if len(line) >= a.max {
			a.long, a.streaming = line, true
			return line, nil
		}
		frag, err = a.br.ReadSlice('\n')
		line = append(line, frag...)
	}
	a.long = line
	if err != nil || len(line) < a.min {
		return line, err
	}
	return a.park(line), nil
}

// maxKeptLine bounds the buffer a child's long lines leave behind, and
// parkMax the answers parked.
const (
	maxKeptLine = 1 << 20
	parkMax     = 4 << 20
)

// park returns line, or, if it is the result of a request waited for, the
// same response without it, the result going to the request's slot.
func (a *answerPark) park(line []byte) []byte {
	id, result, ok := parkableAnswer(line)
	if !ok {
		return line
	}
	v, ok := a.waiting.Load(string(id))
	if !ok {
		return line
	}
	raw := append([]byte(nil), result...) // line's buffer is read into again
	if !v.(*parkSlot).raw.CompareAndSwap(nil, &raw) {
		return line // a second answer under the id: mcp-go drops it
	}
	out := make([]byte, 0, len(id)+len(parkedAnswer)+2)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	return append(out, parkedAnswer...)
}

// parkedAnswer ends the line that stands for a parked answer.
const parkedAnswer = `,"result":{}}` + "\n"

// transportFields are the members mcp-go's stdio transport decodes from a
// line from the child (its probe for an id and method, and
// transport.JSONRPCResponse); encoding/json matches them ignoring case.
var transportFields = [...]string{"jsonrpc", "id", "method", "result", "error"}

// parkableAnswer reports whether line is one mcp-go's stdio transport takes
// for a response under a string id, with a result that is a JSON object and
// no error, whatever else it holds, and returns the id (JSON) and the
// result. It accepts only the plain shape: valid JSON, each of the
// transport's fields at most once and spelled as mcp-go writes it,
// "jsonrpc":"2.0", and an id without escapes.
func parkableAnswer(line []byte) (id, result []byte, ok bool) {
	if !jsonwire.Valid(line) {
		return nil, nil, false
	}
	top, ok := jsonwire.Members(line)
	if !ok {
		return nil, nil, false
	}
	var jsonrpc []byte
	for _, m := range top.Members {
		v := line[m.Start:m.End]
		switch m.Key {
		case "jsonrpc":
			if jsonrpc != nil {
				return nil, nil, false
			}
			jsonrpc = v
		case "id":
			if id != nil || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
				return nil, nil, false
			}
			id = v
		case "result":
			if result != nil || v[0] != '{' {
				return nil, nil, false
			}
			result = v
		default:
			for _, f := range transportFields {
				if strings.EqualFold(m.Key, f) {
					return nil, nil, false
				}
			}
		}
	}
	if string(jsonrpc) != `"2.0"` || id == nil || result == nil {
		return nil, nil, false
	}
	return id, result, true
}
