package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
)

// Asks are the requests mcpmux sent one upstream session's client (a
// child's sampling, elicitation or roots request, relayed) and waits for
// the answers of. Their ids are mcpmux's own strings, which the front end
// knows the client's answers by; nothing else of the session's is here.
type Asks struct {
	mu      sync.Mutex
	next    uint64
	waiting map[string]chan askAnswer // the id as JSON -> its answer
	ended   bool                      // the session ended: no answer can come
}

// ErrSessionEnded is what an ask returns once its session has ended: its
// client can answer no more.
var ErrSessionEnded = errors.New("the client's session ended")

// askAnswer is a client's answer to an ask: a result, or an error.
type askAnswer struct {
	result json.RawMessage
	err    *frame.Error
	gone   bool // the session ended first
}

// askPrefix opens the ids of asks, as JSON.
const askPrefix = `"mcpmux-ask-`

// open returns a new ask's id, as JSON, and where its answer comes; false
// once the session has ended.
func (a *Asks) open() (id string, answer <-chan askAnswer, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return "", nil, false
	}
	a.next++
	id = askPrefix + strconv.FormatUint(a.next, 10) + `"`
	ch := make(chan askAnswer, 1)
	if a.waiting == nil {
		a.waiting = map[string]chan askAnswer{}
	}
	a.waiting[id] = ch
	return id, ch, true
}

// end answers every ask still waiting with ErrSessionEnded, and every later
// one at once: the session ended, and with it any answer its client could
// give.
func (a *Asks) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ended = true
	for id, ch := range a.waiting {
		ch <- askAnswer{gone: true}
		delete(a.waiting, id)
	}
}

// drop forgets the ask id, whose answer nobody waits for any more.
func (a *Asks) drop(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, id)
}

// Answered hands f, a client's answer, to the ask it answers, and reports
// whether it answers one.
func (a *Asks) Answered(f *frame.Frame) bool {
	if len(f.ID) < len(askPrefix) || string(f.ID[:len(askPrefix)]) != askPrefix {
		return false
	}
	a.mu.Lock()
	ch, ok := a.waiting[string(f.ID)]
	delete(a.waiting, string(f.ID))
	a.mu.Unlock()
	if !ok {
		return true // a late answer to an ask given up on: nobody's
	}
	var ans askAnswer
	if f.Error != nil {
		var e mcp.JSONRPCErrorDetails
		if json.Unmarshal(f.Error, &e) != nil {
			e = mcp.JSONRPCErrorDetails{Code: mcp.INTERNAL_ERROR, Message: "the client answered with a malformed error"}
		}
		ans.err = &frame.Error{Code: e.Code, Message: e.Message, Data: frame.RawData(e.Data)}
	} else {
		ans.result = json.RawMessage(append([]byte(nil), f.Result...))
	}
	ch <- ans
	return true
}

// Ask sends a request of method with params down send (one JSON-RPC line,
// written at once) and waits for the client's answer until ctx or the
// session ends: its result, or its error as a *frame.Error.
func (a *Asks) Ask(ctx context.Context, send func(line []byte) error, method string, params json.RawMessage) (json.RawMessage, error) {
	id, answer, ok := a.open()
	if !ok {
		return nil, ErrSessionEnded
	}
	defer a.drop(id)
	m, _ := json.Marshal(method)
	line := make([]byte, 0, 64+len(params))
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"method":`...)
	line = append(line, m...)
	if params != nil {
		line = append(line, `,"params":`...)
		line = append(line, params...)
	}
	line = append(line, '}', '\n')
	if err := send(line); err != nil {
		return nil, err
	}
	select {
	case ans := <-answer:
		if ans.gone {
			return nil, ErrSessionEnded
		}
		if ans.err != nil {
			return nil, ans.err
		}
		return ans.result, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
