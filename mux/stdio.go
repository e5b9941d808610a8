package mux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
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
// ServeStdio returns.
func (m *Mux) ServeStdio(ctx context.Context, identity string, in io.Reader, out io.Writer) error {
	s := server.NewStdioServer(m.srv)
	s.SetErrorLogger(log.New(m.log.With().Str("component", "stdio").Logger(), "", 0))
	server.WithWorkerPoolSize(stdioWorkers)(s)
	server.WithQueueSize(stdioQueue)(s)
	// mcp-go cancels every request in flight as soon as its input ends, so
	// the end is held back until the answers are out.
	drain := &halfClose{idle: make(chan struct{}, 1), ctx: ctx, limit: m.cfg.Mux.CallTimeout + m.maxStartupTimeout(), log: m.log}
	// The session is registered with Listen's context, so the identity must
	// already be in it for list_changed to find the session.
	return s.Listen(WithIdentity(ctx, identity), drain.reader(in), drain.writer(out))
}

func (m *Mux) maxStartupTimeout() time.Duration {
	var d time.Duration
	for _, s := range m.cfg.Servers {
		d = max(d, s.StartupTimeout)
	}
	return d
}

// halfClose counts requests read and answers written, and delays the end of
// the input until they match (or limit passes, or ctx ends).
type halfClose struct {
	pending atomic.Int64
	idle    chan struct{} // gets a token whenever pending drops to zero
	ctx     context.Context
	limit   time.Duration
	log     zerolog.Logger
}

func (h *halfClose) reader(r io.Reader) io.Reader {
	return &requestReader{h: h, r: bufio.NewReaderSize(r, 64*1024)}
}

func (h *halfClose) writer(w io.Writer) io.Writer { return &answerWriter{h: h, w: w} }

// waitIdle blocks until every request read has been answered.
func (h *halfClose) waitIdle() {
	if n := h.pending.Load(); n > 0 {
		h.log.Info().Int64("requests", n).Msg("stdin closed; answering the requests in flight first")
	}
	t := time.NewTimer(h.limit)
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
// requests among them.
type requestReader struct {
	h    *halfClose
	r    *bufio.Reader
	line []byte // the rest of the current line, not yet handed on
	err  error  // the error after line
}

func (rr *requestReader) Read(p []byte) (int, error) {
	if len(rr.line) == 0 {
		if rr.err != nil {
			return 0, rr.err
		}
		line, err := rr.r.ReadBytes('\n')
		if isRequest(line) {
			rr.h.pending.Add(1)
		}
		rr.line = line
		if err != nil {
			if errors.Is(err, io.EOF) {
				rr.h.waitIdle()
			}
			rr.err = err
		}
		if len(rr.line) == 0 {
			return 0, rr.err
		}
	}
	n := copy(p, rr.line)
	rr.line = rr.line[n:]
	return n, nil
}

// isRequest reports whether a line is a JSON-RPC request that gets an
// answer: a method and an id. Notifications and the client's answers to
// mcpmux's own requests are not waited for, nor a subscriptions/listen
// stream, which stays open until the session ends.
func isRequest(line []byte) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return false
	}
	// mcp-go answers a request with an empty method too.
	return msg.Method != nil && *msg.Method != string(mcp.MethodSubscriptionsListen) &&
		len(msg.ID) > 0 && !bytes.Equal(msg.ID, []byte("null"))
}

// answerWriter passes mcp-go's messages through, counting the answers among
// them. mcp-go writes each message with one Write.
type answerWriter struct {
	h *halfClose
	w io.Writer
}

func (aw *answerWriter) Write(p []byte) (int, error) {
	n, err := aw.w.Write(p)
	if isAnswer(p) && aw.h.pending.Add(-1) <= 0 {
		select {
		case aw.h.idle <- struct{}{}:
		default:
		}
	}
	return n, err
}

// isAnswer reports whether a message is a response with an id. It reads only
// the top-level keys up to the first that decides, never the result, which
// may be large.
func isAnswer(msg []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	hasID := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		switch key {
		case "method":
			return false
		case "result", "error":
			return hasID
		case "id":
			var id json.RawMessage
			if dec.Decode(&id) != nil {
				return false
			}
			hasID = !bytes.Equal(id, []byte("null"))
			continue
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
