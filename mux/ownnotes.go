package mux

import (
	"context"
	"errors"
	"maps"
	"sync"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/frame"
)

// Notifications mcpmux sends a session outside any call: tasks/status,
// list_changed, resources/updated, log messages and a task's progress.
//
// mcp-go queues them on the session's one notification channel, which the
// session's GET stream reads, but so does the forwarder of every POST of
// that session in flight; a forwarder that takes one off the channel as its
// POST ends drops it (mcp-go keeps it only with an event store). So for a
// 2025-11-25 HTTP session with a GET stream open mcpmux writes them to that
// stream itself, between mcp-go's own writes to it, and gives them to
// mcp-go's channel only when no stream is open (the next GET or POST
// carries them, as mcp-go would) or the stream ended before writing them.
// They may then come out of order with what mcp-go had queued before.

// streamQueue is how many of mcpmux's notifications a GET stream holds
// before the session's queue counts as full, as mcp-go's does at 100.
const streamQueue = 100

// notifySession sends u a notification of mcpmux's own, made outside any
// call: the stdio client's at once, down its own edge; an HTTP session's
// down its open GET stream, or mcp-go's queue of the session when none is
// open; a listen stream's through mcp-go, which holds it. It never blocks:
// a session whose client does not read what it is sent gets
// server.ErrNotificationChannelBlocked, as from mcp-go's
// SendNotificationToClient, and so does one not initialized.
func (m *Mux) notifySession(u *upstreamSession, method string, params map[string]any) error {
	n := ownNote{method: method, params: params}
	switch {
	case u.kind == kindStdio && u.out != nil:
		line, err := n.line()
		if err != nil {
			return err
		}
		u.out.notify(line)
		return nil
	case u.kind == kindHTTP:
		if taken, err := u.offer(n); taken {
			return err
		}
	}
	cs := u.mcpSession()
	if cs == nil || !cs.Initialized() {
		return server.ErrNotificationNotInitialized
	}
	return m.srv.SendNotificationToClient(m.srv.WithContext(context.Background(), cs), method, params)
}

// ownNote is one notification of notifySession, as given: a stream that
// cannot write it hands it to mcp-go as it would have been.
type ownNote struct {
	method string
	params map[string]any
	// raw, when set, is the message itself, a JSON-RPC line made ready
	// (a request to the client): it goes to a stream, never to mcp-go.
	raw []byte
}

// line is n as a JSON-RPC line, without the mark mcp-go's channel needs
// (announce.go).
func (n ownNote) line() ([]byte, error) {
	if n.raw != nil {
		return n.raw, nil
	}
	params := n.params
	if _, marked := params[ownMark]; marked {
		params = maps.Clone(params)
		delete(params, ownMark)
	}
	line, err := notificationLine(n.method, params)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// event is n as a server-sent event.
func (n ownNote) event() ([]byte, error) {
	line, err := n.line()
	if err != nil {
		return nil, err
	}
	return frame.Event(line), nil
}

// getStream is one listening GET stream of an HTTP session as mcpmux's own
// notifications reach it: open once mcp-go has begun it as an event
// stream, until its request ends. Its writer goroutine (run) belongs to
// the request.
type getStream struct {
	cancel context.CancelFunc // ends the request, and with it mcp-go's side
	owner  *upstreamSession   // set by addStream; nil in tests of a lone stream

	mu     sync.Mutex
	open   bool
	closed bool
	queue  chan ownNote
	stop   chan struct{}
}

func newGetStream(cancel context.CancelFunc) *getStream {
	return &getStream{cancel: cancel, queue: make(chan ownNote, streamQueue), stop: make(chan struct{})}
}

// begin opens the stream to notifications, once mcp-go has begun it.
func (s *getStream) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = !s.closed
}

// offer queues n on the stream: taken is false if the stream is not open,
// and err is ErrNotificationChannelBlocked if its queue is full.
func (s *getStream) offer(n ownNote) (taken bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.open {
		return false, nil
	}
	select {
	case s.queue <- n:
		return true, nil
	default:
		return true, server.ErrNotificationChannelBlocked
	}
}

// close ends offers; run then hands back what it has not written.
func (s *getStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.open, s.closed = false, true
		close(s.stop)
	}
}

// errStreamOver is what a write to a GET stream whose request has ended,
// or that mcp-go has not begun, returns.
var errStreamOver = errors.New("the GET stream is over")

// errUnflushed wraps the error of a write to a GET stream whose bytes were
// written but not flushed: the client may have them, so they are not sent
// again.
var errUnflushed = errors.New("the GET stream's event was written but not flushed")

// run writes what the stream is offered with write until close, and
// hands on what it could not write and what was left when the stream
// closed: to the session's other open stream if it has one, else to
// giveBack. A write that fails ends the stream: its client is not
// reading, or has gone.
func (s *getStream) run(write func([]byte) error, giveBack func(ownNote)) {
	handOn := func(n ownNote) {
		if s.owner != nil {
			if taken, err := s.owner.offerExcept(n, s); taken && err == nil {
				return
			}
		}
		giveBack(n)
	}
	for {
		select {
		case n := <-s.queue:
			ev, err := n.event()
			if err != nil {
				giveBack(n) // mcp-go says what is wrong with it
				continue
			}
			if err := write(ev); err != nil {
				s.close()
				s.cancel()
				if !errors.Is(err, errUnflushed) {
					handOn(n)
				}
			}
		case <-s.stop:
			for {
				select {
				case n := <-s.queue:
					handOn(n)
				default:
					return
				}
			}
		}
	}
}
