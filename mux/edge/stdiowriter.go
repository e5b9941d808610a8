package edge

import (
	"sync"

	"github.com/mcpmux/mcpmux/internal/groupwrite"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The stdio edge's writer: every message to the stdio client, mcp-go's
// and mcpmux's own, whole and in the order written.

// answerWriter writes the stdio client's output: mcp-go's messages, passed
// through (its announcements dropped) and counted, and mcpmux's own, the
// answers of the front end's requests among them. mcp-go writes each
// message with one Write (writeResponse's Fprintf); w keeps each message
// whole, and writes those written at once together.
type answerWriter struct {
	h *halfClose
	w *groupwrite.Writer

	watchMu sync.Mutex
	watch   map[string]func(answer []byte) // run as the answer under the id is written (AfterAnswer)
}

// AfterAnswer runs f with the answer under id (canonical,
// jsonwire.AnswerIDKey) just before it is written, holding the writer:
// what f lets through follows the answer, and a client that read the
// answer finds f done. f must not write to the client.
func (aw *answerWriter) AfterAnswer(id string, f func(answer []byte)) {
	aw.watchMu.Lock()
	defer aw.watchMu.Unlock()
	if aw.watch == nil {
		aw.watch = map[string]func([]byte){}
	}
	aw.watch[id] = f
}

// watched takes what is to run after the answer under id.
func (aw *answerWriter) watched(id string) func([]byte) {
	aw.watchMu.Lock()
	defer aw.watchMu.Unlock()
	f := aw.watch[id]
	delete(aw.watch, id)
	return f
}

// writeOwn writes a whole message of mcpmux's own, which is not counted.
func (aw *answerWriter) writeOwn(msg []byte) {
	_, _ = aw.w.Write(msg)
}

func (aw *answerWriter) Write(p []byte) (int, error) {
	id, at, _, isAnswer := answerIDAt(p)
	msg := p
	if isAnswer {
		if orig := aw.h.clientID(id); orig != nil {
			msg = jsonwire.WithValue(p, at, orig) // the client's id, for mcp-go's stand-in
		}
	}
	// mcp-go's announcements of its own go; mcpmux's pass without their
	// mark (upstream.Announcement).
	out, swapped := upstream.Announcement(msg)
	if !swapped {
		out = msg
	}
	swapped = swapped || len(msg) != len(p)
	var n int
	var err error
	if isAnswer {
		n, err = aw.answer(id, out)
	} else {
		n, err = aw.w.Write(out)
	}
	if swapped && err == nil {
		n = len(p)
	}
	return n, err
}

// answer writes msg, the whole answer under id, unless its request was
// cancelled, and counts it.
func (aw *answerWriter) answer(id string, msg []byte) (n int, err error) {
	n = len(msg)
	after := aw.watched(id)
	aw.h.free(id)
	if !aw.h.dropAnswer(id) {
		var before func()
		if after != nil {
			before = func() { after(msg) }
		}
		n, err = aw.w.WriteAfter(before, msg)
	}
	if aw.h.answered(id) {
		select {
		case aw.h.idle <- struct{}{}:
		default:
		}
	}
	return n, err
}

// answerID returns the id, in canonical form, of a response with an id: the
// first of the top-level keys method, result and error decides, and the id
// must come before it. msg is mcp-go's (valid JSON); the result is skipped,
// not decoded.
func answerID(msg []byte) (string, bool) {
	id, _, _, ok := answerIDAt(msg)
	return id, ok
}

// answerIDAt is answerID, with where the id sits in msg and whether msg
// is a result.
func answerIDAt(msg []byte) (id string, at jsonwire.Member, result, ok bool) {
	top, ok := jsonwire.Members(msg)
	if !ok {
		return "", jsonwire.Member{}, false, false
	}
	for _, m := range top.Members {
		switch m.Key {
		case "method":
			return "", jsonwire.Member{}, false, false
		case "result", "error":
			id, ok = jsonwire.AnswerIDKey(msg[at.Start:at.End])
			return id, at, m.Key == "result", ok
		case "id":
			at = m
		}
	}
	return "", jsonwire.Member{}, false, false
}
