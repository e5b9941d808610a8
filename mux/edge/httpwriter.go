package edge

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The HTTP edge's writer: what mcp-go and the front end write to one
// POST or GET response, bounded by the write timeout.

// recorder wraps the client's ResponseWriter. It hands out the session a
// response opens (the id goes out only once the registry holds it), and it
// bounds each write by the write timeout, so that a client that stops
// reading is cut off while a stream that keeps flowing stays open as long
// as it likes.
type recorder struct {
	http.ResponseWriter
	rc      *http.ResponseController
	write   time.Duration
	h       *HTTPUpstream
	pending *upstream.Session // admitted for this initialize, not yet handed out
	orphan  string            // an id mcp-go handed out that the registry does not hold

	// header is what mcp-go sets, from its forwarder and its handler, under
	// its own lock; it goes out with mcp-go's first WriteHeader.
	header http.Header
	// stream is the GET stream this response is, if it is one; it opens
	// to mcpmux's own notifications once mcp-go begins it.
	stream *upstream.Stream
	// standIn is the id mcp-go was handed for the request's own, clientID
	// (package reqid); nil when mcp-go has the client's id.
	standIn, clientID []byte

	// mu serialises mcp-go's writes (from its forwarder and its handler)
	// with mcpmux's own to a GET stream (writeStream).
	mu     sync.Mutex
	status int
	// events is set once the response is an event stream; done, once the
	// request's handler returned, after which nothing may be written.
	events, done bool
}

// finish marks the response over: a late writeEvent writes nothing.
func (s *recorder) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
}

// Header is the header mcp-go writes; see recorder.header.
func (s *recorder) Header() http.Header { return s.header }

func (s *recorder) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeader(code)
}

func (s *recorder) writeHeader(code int) {
	if s.status != 0 {
		s.ResponseWriter.WriteHeader(code)
		return
	}
	s.status = code
	s.events = strings.HasPrefix(s.Header().Get("Content-Type"), "text/event-stream")
	if sid := s.Header().Get(server.HeaderKeySessionID); sid != "" {
		switch {
		case s.pending != nil && code < 300:
			s.h.sessions.Open(s.pending, sid, time.Now().UnixNano())
			s.pending = nil
		default:
			// Never let out an id that is not in the registry.
			s.Header().Del(server.HeaderKeySessionID)
			s.orphan = sid
		}
	}
	real := s.ResponseWriter.Header()
	for k, v := range s.header {
		real[k] = v
	}
	s.ResponseWriter.WriteHeader(code)
	if s.stream != nil && s.events {
		s.stream.Begin()
	}
}

// writeStream writes one event of mcpmux's own to the GET stream mcp-go
// has begun, within the write timeout, between mcp-go's own writes;
// errStreamOver once the request's handler returned.
func (s *recorder) writeStream(event []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || !s.events {
		return upstream.ErrStreamOver
	}
	s.extend()
	if _, err := s.ResponseWriter.Write(event); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", upstream.ErrUnflushed, err)
	}
	return nil
}

// settle runs when the request is over: a reservation not handed out is
// given back, and a session mcp-go opened without the registry is ended.
func (s *recorder) settle() {
	if s.pending != nil {
		s.h.sessions.Release(s.pending)
	}
	if s.orphan != "" {
		s.h.expire(s.orphan)
	}
}

func (s *recorder) extend() {
	if s.write > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.write))
	}
}

// carry records that mcp-go is handed the request under stand (a
// stand-in) for the client's id, to be put back in the answer.
func (s *recorder) carry(id, stand []byte) {
	s.standIn, s.clientID = stand, id
}

// restoreID returns b, one JSON body or one event of mcp-go's, with the
// client's id in place of the stand-in if b is the request's answer.
func (s *recorder) restoreID(b []byte) []byte {
	msg, start := b, 0
	if first := bytes.TrimLeft(b, " \t\r\n"); len(first) == 0 || first[0] != '{' {
		i := bytes.Index(b, upstream.SSEData[1:])
		if i < 0 {
			return b
		}
		start = i + len(upstream.SSEData) - 1
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			end = len(b) - start
		}
		msg = b[start : start+end]
	}
	top, ok := jsonwire.Members(msg)
	if !ok || top.Last("method") != nil {
		return b
	}
	m := top.Last("id")
	if m == nil || !bytes.Equal(msg[m.Start:m.End], s.standIn) {
		return b
	}
	at := *m
	at.Start += start
	at.End += start
	return jsonwire.WithValue(b, at, s.clientID)
}

// Write passes mcp-go's writes on, its own announcements dropped
// (framedAnnouncement): mcp-go writes each JSON body (json.Encoder) and
// each event (writeSSEEvent) with one Write, and sets no Content-Length on
// them.
func (s *recorder) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == 0 {
		s.writeHeader(http.StatusOK)
	}
	s.extend()
	msg := b
	if s.standIn != nil {
		msg = s.restoreID(b)
	}
	out, swapped := upstream.FramedAnnouncement(msg)
	if !swapped {
		out = msg
	}
	swapped = swapped || len(msg) != len(b)
	n, err := s.ResponseWriter.Write(out)
	if swapped && err == nil {
		n = len(b)
	}
	return n, err
}

// Flush keeps server-sent events flowing through the recorder.
func (s *recorder) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extend()
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *recorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// discard is the ResponseWriter of mcpmux's own requests to mcp-go.
type discard struct{ header http.Header }

func (d discard) Header() http.Header { return d.header }

func (discard) WriteHeader(int) {}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

func (discard) Flush() {}

func (discard) CanStream() bool { return false }
