package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
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

// Notify sends u a notification of mcpmux's own, made outside any
// call: the stdio client's at once, down its own edge; an HTTP session's
// down its open GET stream, or mcp-go's queue of the session when none is
// open; a listen stream's through mcp-go, which holds it. It never blocks:
// a session whose client does not read what it is sent gets
// server.ErrNotificationChannelBlocked, as from mcp-go's
// SendNotificationToClient, and so does one not initialized.
func (s *Registry) Notify(u *Session, method string, params map[string]any) error {
	n := Note{Method: method, Params: params}
	switch {
	case u.Kind == KindStdio && u.out != nil:
		line, err := n.Line()
		if err != nil {
			return err
		}
		u.out.Notify(line)
		return nil
	case u.Kind == KindHTTP:
		if taken, err := u.Offer(n); taken {
			return err
		}
	}
	cs := u.MCP()
	if cs == nil || !cs.Initialized() {
		return server.ErrNotificationNotInitialized
	}
	return s.srv.SendNotificationToClient(s.srv.WithContext(context.Background(), cs), method, params)
}

// Note is one notification of Notify, as given: a stream that
// cannot write it hands it to mcp-go as it would have been.
type Note struct {
	Method string
	Params map[string]any
	// Raw, when set, is the message itself, a JSON-RPC line made ready
	// (a request to the client): it goes to a stream, never to mcp-go.
	Raw []byte
}

// Line is n as a JSON-RPC Line, without the mark mcp-go's channel needs
// (announce.go).
func (n Note) Line() ([]byte, error) {
	if n.Raw != nil {
		return n.Raw, nil
	}
	params := n.Params
	if _, marked := params[OwnMark]; marked {
		params = maps.Clone(params)
		delete(params, OwnMark)
	}
	line, err := NotificationLine(n.Method, params)
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// Event is n as a server-sent Event.
func (n Note) Event() ([]byte, error) {
	line, err := n.Line()
	if err != nil {
		return nil, err
	}
	return frame.Event(line), nil
}

// Stream is one listening GET stream of an HTTP session as mcpmux's own
// notifications reach it: open once mcp-go has begun it as an event
// stream, until its request ends. Its writer goroutine (run) belongs to
// the request.
type Stream struct {
	cancel context.CancelFunc // ends the request, and with it mcp-go's side
	owner  *Session           // set by addStream; nil in tests of a lone stream

	mu     sync.Mutex
	open   bool
	closed bool
	queue  chan Note
	stop   chan struct{}
}

func NewStream(cancel context.CancelFunc) *Stream {
	return &Stream{cancel: cancel, queue: make(chan Note, streamQueue), stop: make(chan struct{})}
}

// Begin opens the stream to notifications, once mcp-go has begun it.
func (s *Stream) Begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open = !s.closed
}

// offer queues n on the stream: taken is false if the stream is not open,
// and err is ErrNotificationChannelBlocked if its queue is full.
func (s *Stream) offer(n Note) (taken bool, err error) {
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

// Close ends offers; run then hands back what it has not written.
func (s *Stream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.open, s.closed = false, true
		close(s.stop)
	}
}

// ErrStreamOver is what a write to a GET stream whose request has ended,
// or that mcp-go has not begun, returns.
var ErrStreamOver = errors.New("the GET stream is over")

// ErrUnflushed wraps the error of a write to a GET stream whose bytes were
// written but not flushed: the client may have them, so they are not sent
// again.
var ErrUnflushed = errors.New("the GET stream's event was written but not flushed")

// Run writes what the stream is offered with write until close, and
// hands on what it could not write and what was left when the stream
// closed: to the session's other open stream if it has one, else to
// giveBack. A write that fails ends the stream: its client is not
// reading, or has gone.
func (s *Stream) Run(write func([]byte) error, giveBack func(Note)) {
	handOn := func(n Note) {
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
			ev, err := n.Event()
			if err != nil {
				giveBack(n) // mcp-go says what is wrong with it
				continue
			}
			if err := write(ev); err != nil {
				s.Close()
				s.cancel()
				if !errors.Is(err, ErrUnflushed) {
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

// OwnMark is the parameter that marks a list_changed mcpmux sends.
const OwnMark = "io.mcpmux/own"

var OwnParams = map[string]any{OwnMark: true}

// NotificationLine is a notification as JSON-RPC.
func NotificationLine(method string, params map[string]any) ([]byte, error) {
	return json.Marshal(mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}}})
}
