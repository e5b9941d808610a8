package edge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/groupwrite"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/mux/edge/reqid"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Upstream concurrency: the stdio server runs 5 tool calls at a time unless
// told otherwise, which would serialise slow calls behind each other.
const (
	stdioWorkers = 100 // mcp-go v1.2.1 caps the pool here
	stdioQueue   = 4096
)

// ServeStdio serves one client over in and out as identity until in ends or
// ctx is done. A client may close its stdin right after its last request
// (a script piping into mcpmux): every request read is still answered before
// ServeStdio returns. The requests mcpmux answers itself go to the pipeline
// from the edge's reader (stdioFront); the rest go on to mcp-go's stdio
// server, reading what the reader passes on.
func ServeStdio(ctx context.Context, env Env, identity string, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(env.MCP)
	s.SetErrorLogger(liblog.Std(env.Log.With().Str("component", "stdio").Logger(), slog.LevelError))
	server.WithWorkerPoolSize(stdioWorkers)(s)
	server.WithQueueSize(stdioQueue)(s)
	// mcp-go cancels every request in flight as soon as its input ends, so
	// the end is held back until the answers are out.
	drain := &halfClose{idle: make(chan struct{}, 1), ctx: ctx, limit: env.Drain,
		maxMessage: env.MaxMessageBytes, log: env.Log}
	w := drain.writer(out) // first: the reader answers oversized messages through it
	front := &stdioFront{b: env.Backend, aw: drain.out, sem: make(chan struct{}, stdioCalls), work: make(chan func())}
	front.u = env.Sessions.OpenStdio(identity, stdioOut{front})
	defer env.Sessions.CloseStdio(front.u)
	// The session is registered with Listen's context, so the identity must
	// already be in it for the session to be found.
	ctx = upstream.WithIdentity(ctx, identity)
	front.base, front.stop = context.WithCancel(ctx)
	defer front.close()
	r := drain.reader(in)
	r.front = front
	return s.Listen(ctx, r, w)
}

// stdioCalls bounds the requests the stdio front end runs at once; more
// wait for a turn, and beyond stdioQueue waiting the reader waits too.
const stdioCalls = 2 * stdioWorkers

// halfClose counts requests read and answers written, and delays the end of
// the input until they match (or limit passes, or ctx ends).
type halfClose struct {
	pending atomic.Int64
	idle    chan struct{} // gets a token whenever pending drops to zero
	// waiting counts the requests read under each id (canonical form) and
	// not answered yet: an answer counts only against a request of its id,
	// so that answers to messages not counted (a refused
	// subscriptions/listen) cannot end the wait early. Only this session's
	// reader and writer take mu.
	mu      sync.Mutex
	waiting map[string]int
	// dropping counts, per id, the answers not to write: the client
	// cancelled those requests, and the protocol has a cancelled request
	// go unanswered.
	dropping map[string]int
	// live holds, by its id's dup form (msgID.dup), each request waiting
	// for its answer that the edge checked, with the key of the id mcp-go
	// answers it under; carried, the client's id of each request mcp-go was
	// handed under a stand-in (package reqid), by the stand-in's key.
	live     map[string]string
	carried  map[string]carriedID
	standIns int64 // stand-ins handed out
	// asked counts, per id, mcp-go's requests to the client (a relayed
	// sampling, elicitation or roots request) not answered yet: the
	// client's answer to one, error or result, mcp-go takes without
	// answering. askedAny says whether any is, so that the reader looks
	// at a line for it only then.
	asked    map[string]int
	askedAny atomic.Bool
	ctx      context.Context
	limit    func() time.Duration
	// maxMessage bounds one line from the client (max_message_bytes; 0
	// means the default).
	maxMessage int64
	log        zerolog.Logger
	out        *answerWriter // set by writer
}

func (h *halfClose) reader(r io.Reader) *requestReader {
	max := h.maxMessage
	if max <= 0 {
		max = config.DefaultMaxMessageBytes
	}
	return &requestReader{h: h, r: bufio.NewReaderSize(r, 64*1024), max: max}
}

func (h *halfClose) writer(w io.Writer) io.Writer {
	h.out = &answerWriter{h: h, w: groupwrite.New(w)}
	return h.out
}

// carriedID is the id of a request mcp-go holds under a stand-in: the
// client's, as written, and its dup form.
type carriedID struct {
	dup string
	id  []byte
}

// expect records a request read under id, the key mcp-go answers it under.
// dup is its id's dup form and orig, when mcp-go was handed a stand-in, the
// client's id as written; dup is "" for a message the edge does not check
// (one mcp-go answers though it is no request). It reports false, and
// records nothing, if a request under an equal id is still in flight.
func (h *halfClose) expect(id, dup string, orig []byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if dup != "" {
		if _, taken := h.live[dup]; taken {
			return false
		}
		if h.live == nil {
			h.live = map[string]string{}
		}
		h.live[dup] = id
	}
	if orig != nil {
		if h.carried == nil {
			h.carried = map[string]carriedID{}
		}
		h.carried[id] = carriedID{dup: dup, id: orig}
	}
	if h.waiting == nil {
		h.waiting = map[string]int{}
	}
	h.waiting[id]++
	h.pending.Add(1)
	return true
}

// nextStandIn returns the stand-in for the next carried request.
func (h *halfClose) nextStandIn() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.standIns++
	return reqid.StandIn(h.standIns)
}

// clientID returns the client's id of the request mcp-go answers under id,
// if mcp-go holds it under a stand-in.
func (h *halfClose) clientID(id string) []byte {
	if id == "" || id[0] != '-' {
		return nil // only stand-ins are negative
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.carried[id].id
}

// cancelKey returns the key mcp-go holds the request a cancellation names
// under, given the id it names as written, and the stand-in to name instead
// if there is one.
func (h *halfClose) cancelKey(named []byte) (key string, standIn []byte) {
	dup, _ := reqid.DupKey(named)
	h.mu.Lock()
	defer h.mu.Unlock()
	key, ok := h.live[dup]
	if !ok {
		return dup, nil
	}
	if _, ok := h.carried[key]; ok {
		return key, []byte(key)
	}
	return key, nil
}

// refuse answers a request the edge refuses for its id (its JSON, as
// written) with -32600 saying text.
func (h *halfClose) refuse(id []byte, text string) {
	h.log.Warn().RawJSON("id", jsonwire.Loggable(id)).Str("why", text).Msg("client request refused for its id")
	if h.out != nil {
		h.out.writeOwn(reqid.Refusal(id, text))
	}
}

// cancelled records that the client cancelled its request id, if that is
// still waiting for its answer.
func (h *halfClose) cancelled(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting[id] > h.dropping[id] {
		if h.dropping == nil {
			h.dropping = map[string]int{}
		}
		h.dropping[id]++
	}
}

// dropAnswer reports whether the answer under id is to be dropped, its
// request having been cancelled, and records that it was.
func (h *halfClose) dropAnswer(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dropping[id] == 0 {
		return false
	}
	if h.dropping[id]--; h.dropping[id] == 0 {
		delete(h.dropping, id)
	}
	return true
}

// free makes the id of the request answered under id free for another
// request: before its answer is written, so that a client that sends its
// next request under the same id as soon as it reads the answer finds the
// id free.
func (h *halfClose) free(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting[id] == 0 {
		return
	}
	dup := id
	if c, ok := h.carried[id]; ok {
		dup = c.dup
		delete(h.carried, id)
	}
	if dup != "" && h.live[dup] == id {
		delete(h.live, dup)
	}
}

// answered records an answer under id, and reports whether no request is
// left waiting.
func (h *halfClose) answered(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting[id] == 0 {
		return false
	}
	if h.waiting[id]--; h.waiting[id] == 0 {
		delete(h.waiting, id)
	}
	return h.pending.Add(-1) == 0
}

// waitIdle blocks until every request read has been answered.
func (h *halfClose) waitIdle() {
	if n := h.pending.Load(); n > 0 {
		h.log.Info().Int64("requests", n).Msg("stdin closed; answering the requests in flight first")
	}
	var limit time.Duration // none: the answers due are not waited for
	if h.limit != nil {
		limit = h.limit()
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	for h.pending.Load() > 0 {
		select {
		case <-h.idle:
		case <-t.C:
			return
		case <-h.ctx.Done():
			return
		}
	}
}

// requestReader passes the client's lines through unchanged, counting the
// requests among them. A line longer than max is never held whole: it is
// read to its end and dropped, and answered with a JSON-RPC error.
type requestReader struct {
	h    *halfClose
	r    *bufio.Reader
	max  int64
	buf  []byte // holds the current line
	line []byte // the rest of the current line, not yet handed on
	err  error  // the error after line
	// drained is set once the end of the input waited for the answers.
	drained bool
	// front answers the requests it takes, which mcp-go then never sees;
	// nil hands every line on.
	front *stdioFront
}

func (rr *requestReader) Read(p []byte) (int, error) {
	for len(rr.line) == 0 {
		if rr.err != nil {
			if errors.Is(rr.err, io.EOF) && !rr.drained {
				rr.drained = true
				rr.h.waitIdle()
			}
			if rr.front != nil {
				rr.front.end() // as mcp-go cancels its requests once this error is read
			}
			return 0, rr.err
		}
		line, err := rr.readLine()
		line = rr.admit(line)
		if len(line) > 0 && line[len(line)-1] != '\n' {
			// mcp-go drops a last line that has no newline.
			line = append(line, '\n')
		}
		rr.line, rr.err = line, err
	}
	n := copy(p, rr.line)
	rr.line = rr.line[n:]
	return n, nil
}

// admit does what the edge does with line, one message from the client,
// and returns what to hand mcp-go of it: nothing for a message the edge
// refuses (it is answered here), a request mcpmux answers itself (the
// front end takes it) or a client's answer to one of mcpmux's requests;
// the line with a stand-in id for a request mcp-go answers whose id it
// would not write back as it came (package reqid); the line itself for
// anything else. Requests are counted, whoever answers them.
func (rr *requestReader) admit(line []byte) []byte {
	initialize := false
	if rr.front != nil {
		var handled bool
		var hand []byte
		if handled, initialize, hand = rr.frontAdmit(line); handled {
			return nil
		} else if hand != nil {
			line = hand
		}
	}
	return rr.handOn(line, initialize)
}

// frontAdmit does what the front end does with line; handled is false
// for a line that goes on to mcp-go, as hand if that is not nil (takes),
// initialize true if it is the client's initialize.
func (rr *requestReader) frontAdmit(line []byte) (handled, initialize bool, hand []byte) {
	h, front := rr.h, rr.front
	// A call outlives the reader's buffer and reads its own copy: a line
	// of common size is copied first and read once; a longer one is read
	// in place, and again in its copy only if it is taken.
	msg, copied := line, len(line) <= readCopied
	if copied {
		msg = bytes.Clone(line)
	}
	f := frame.Read(msg)
	switch {
	case f.Refused != nil:
		if f.Kind != frame.Notification {
			h.refuse([]byte("null"), f.Refused.Message)
		}
		return true, false, nil
	case f.Kind == frame.Response:
		return front.u.Asks.Answered(&f), false, nil
	case f.Kind != frame.Request || !mayTake(f.Method):
		return false, f.Kind == frame.Request && f.Method == string(mcp.MethodInitialize), nil
	}
	if !copied {
		f = frame.Read(bytes.Clone(line))
	}
	serve, hand := front.serving(&f)
	if serve == nil {
		return false, false, hand
	}
	dup, _ := reqid.DupKey(f.ID)
	if !h.expect(dup, dup, nil) {
		h.refuse(f.ID, reqid.DupIDText)
		return true, false, nil
	}
	front.run(dup, serve)
	return true, false, nil
}

// readCopied is the longest line frontAdmit copies before reading it.
const readCopied = 4 << 10

// handOn is admit for a message mcp-go answers; initialize says it is the
// client's initialize, whose answer, if a result, opens the session to
// mcpmux's notifications as it is written (answerWriter.AfterAnswer).
func (rr *requestReader) handOn(line []byte, initialize bool) []byte {
	h := rr.h
	v := reqid.Read(line)
	switch v.Kind {
	case reqid.BadType:
		h.refuse([]byte("null"), reqid.BadIDText)
		return nil
	case reqid.Null:
		h.refuse([]byte("null"), reqid.NullIDText)
		return nil
	}
	var written, orig []byte // the id as the client wrote it; and again, if carried
	handed := line
	if v.Kind == reqid.Request || v.Carried {
		written = line[v.At.Start:v.At.End]
		if v.Carried {
			orig = bytes.Clone(written)
			handed = jsonwire.WithValue(line, v.At, h.nextStandIn())
		}
	}
	var id string
	var ok bool
	if orig == nil {
		id, ok = v.RequestID(line) // the one reading of the line
	} else {
		id, ok = reqid.RequestID(handed)
	}
	if !ok && orig != nil {
		// mcp-go does not answer it under its id (a subscriptions/listen
		// stream, say): it gets the line as written.
		handed, orig = line, nil
		id, ok = reqid.RequestID(line)
	}
	if ok {
		dup := ""
		if v.Kind == reqid.Request {
			dup = v.Dup
			if !v.Carried {
				dup = id // the id as written, what jsonwire.AnswerIDKey makes of it
			}
		}
		if !h.expect(id, dup, orig) {
			h.refuse(written, reqid.DupIDText)
			return nil
		}
		if initialize {
			u := rr.front.u
			h.out.AfterAnswer(id, func(answer []byte) {
				if _, _, result, _ := answerIDAt(answer); result {
					u.MarkAnswered()
				}
			})
		}
		return handed
	}
	if at, ok := reqid.CancelTarget(line); ok {
		key, standIn := h.cancelKey(line[at.Start:at.End])
		if standIn != nil {
			line = jsonwire.WithValue(line, at, standIn)
		}
		h.cancelled(key)
		if rr.front != nil {
			rr.front.cancelled(key)
		}
	}
	return line
}

// readLine reads the next line of at most max bytes (not counting its
// newline), skipping and answering longer ones.
func (rr *requestReader) readLine() ([]byte, error) {
	if cap(rr.buf) > 1<<20 {
		rr.buf = nil // one large message does not pin its buffer for good
	}
	rr.buf = rr.buf[:0]
	var size int64  // of the line so far, newline included
	var head []byte // the start of an oversized line; nil while it fits
	for {
		frag, err := rr.r.ReadSlice('\n')
		size += int64(len(frag))
		content := size
		if err == nil {
			content-- // the newline
		}
		if head == nil && content > rr.max {
			head = make([]byte, 0, frame.OversizedHead)
			head = append(head, rr.buf[:min(len(rr.buf), frame.OversizedHead)]...)
			head = append(head, frag[:min(len(frag), frame.OversizedHead-len(head))]...)
			rr.buf = rr.buf[:0]
		}
		if head == nil {
			rr.buf = append(rr.buf, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if head == nil {
			return rr.buf, err
		}
		rr.h.oversized(head, content, rr.max)
		if err != nil {
			return nil, err
		}
		size, head = 0, nil
	}
}

// oversized logs a message from the client over max_message_bytes and
// answers it with an error, under its id when its first bytes tell it.
func (h *halfClose) oversized(head []byte, size, max int64) {
	id := leadingID(head)
	h.log.Warn().Int64("bytes", size).Int64("max_message_bytes", max).RawJSON("id", id).
		Msg("client sent a message over max_message_bytes; it was dropped")
	if h.out == nil {
		return
	}
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    mcp.INVALID_REQUEST,
			"message": fmt.Sprintf("the message exceeded max_message_bytes (%s) and was dropped", config.FormatSize(max)),
		},
	})
	h.out.writeOwn(append(msg, '\n'))
}

// leadingID returns the id of a JSON-RPC message from its first bytes, if
// it is a top-level string or number that comes before anything cut off;
// null otherwise.
func leadingID(head []byte) json.RawMessage {
	if id, _ := jsonwire.HeadFields(head); id != nil {
		return id
	}
	return json.RawMessage("null")
}
