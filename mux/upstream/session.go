package upstream

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Kind says where an upstream session lives.
type Kind int

const (
	KindHTTP   Kind = iota // a 2025-11-25 streamable HTTP session, with an id, counted against the caps
	KindStdio              // the stdio client
	KindListen             // a 2026-07-28 subscriptions/listen stream, alive while its request is
)

// Session is one upstream session and its owner.
type Session struct {
	ID       string // set when an HTTP session is handed out; "" otherwise
	Identity string
	Kind     Kind

	// Written under mu, so that a session is never ended as idle while a
	// request begins on it; read without it where a stale answer is
	// harmless (the sweeper's first pass, mcp-go's id check).
	seen   atomic.Int64 // unix nanoseconds of the last request's start or end
	active atomic.Int32 // requests in progress
	ended  atomic.Bool
	// answered is set once the session's initialize answer is written
	// (MarkAnswered): from then on it receives mcpmux's notifications, and
	// never before, so that nothing reaches a client ahead of that answer.
	answered atomic.Bool

	mu      sync.Mutex           // this session's alone: never shared by others' calls
	cs      server.ClientSession // what mcp-go registered for it; nil before
	streams []*Stream            // listening GET streams in the order they opened, ended with the session
	// out is the stdio client's edge, which carries what mcpmux sends the
	// session outside any call; nil for any other session.
	out Out
	// Asks are mcpmux's requests to the client waiting for its answers;
	// calls, an HTTP session's requests mcpmux answers itself, in flight.
	Asks  Asks
	Calls CallTable
	// level is the log level the session asked for with logging/setLevel;
	// until it asks (levelSet false) it gets every log message.
	level    mcp.LoggingLevel
	levelSet bool
	// ending is what must happen once the session ends (OnEnd), by the
	// order it was asked for, run once by the registry's own goroutine
	// (Registry.endings).
	ending   map[uint64]func()
	endSeq   uint64
	registry *Registry // which runs them; nil: a goroutine of their own
	// ids holds the ids of the session's HTTP requests in flight, by their
	// dup form (msgID.dup), each with the stand-in mcp-go was handed for it
	// (nil for none).
	ids map[string][]byte
}

// ClaimID records a request of the session in flight under an id of dup
// form dup, handed to mcp-go as stand (nil: as it is); false, and nothing
// recorded, if one under an equal id is in flight already.
func (u *Session) ClaimID(dup string, stand []byte) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, taken := u.ids[dup]; taken {
		return false
	}
	if u.ids == nil {
		u.ids = map[string][]byte{}
	}
	u.ids[dup] = stand
	return true
}

// ReleaseID ends what claimID recorded.
func (u *Session) ReleaseID(dup string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.ids, dup)
}

// StandInFor returns the stand-in of the session's request in flight under
// an id of dup form dup, or nil.
func (u *Session) StandInFor(dup string) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[dup]
}

// Begin notes a request on the session; false if the session has ended.
func (u *Session) Begin(now int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended.Load() {
		return false
	}
	u.active.Add(1)
	u.seen.Store(now)
	return true
}

// Finish notes the end of a request begun with begin.
func (u *Session) Finish(now int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen.Store(now)
	u.active.Add(-1)
}

// AddStream registers a listening stream, to be ended when the session
// ends and to carry mcpmux's own notifications (offer); it returns a func
// that unregisters it, or false if the session has already ended.
func (u *Session) AddStream(s *Stream) (remove func(), ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended.Load() {
		return nil, false
	}
	u.streams = append(u.streams, s)
	s.owner = u
	return func() {
		u.mu.Lock()
		u.streams = slices.DeleteFunc(u.streams, func(o *Stream) bool { return o == s })
		u.mu.Unlock()
	}, true
}

// Offer queues n on the newest of the session's open listening streams
// that has room, so that one note after another takes the same stream;
// taken is false if none is open, and err ErrNotificationChannelBlocked if
// every open one is full.
func (u *Session) Offer(n Note) (taken bool, err error) {
	return u.offerExcept(n, nil)
}

// offerExcept is offer on every stream but not.
func (u *Session) offerExcept(n Note, not *Stream) (taken bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range slices.Backward(u.streams) {
		if s == not {
			continue
		}
		if ok, serr := s.offer(n); ok {
			if serr == nil {
				return true, nil
			}
			taken, err = true, serr
		}
	}
	return taken, err
}

// End marks the session ended and ends its listening streams; false if it
// had already ended.
func (u *Session) End() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.endLocked()
}

// endIfIdle is end for a session with no request in progress whose last
// one ended before cutoff (unix nanoseconds); false, and the session goes
// on, otherwise.
func (u *Session) endIfIdle(cutoff int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.active.Load() > 0 || u.seen.Load() >= cutoff {
		return false
	}
	return u.endLocked()
}

func (u *Session) endLocked() bool {
	if u.ended.Load() {
		return false
	}
	u.ended.Store(true)
	u.Asks.end()
	for _, s := range u.streams {
		s.cancel()
	}
	u.streams = nil
	if len(u.ending) > 0 {
		if u.registry != nil {
			u.registry.hand(u)
		} else {
			go u.runEnding()
		}
	}
	return true
}

// OnEnd arranges for f to run once u has ended, on the registry's
// goroutine: never on the one that ends it (the idle sweeper, a DELETE, an
// edge closing), and never while u's lock is held. stop undoes it, for
// what u no longer holds; ok is false, and f will never run, if u has
// ended already.
func (u *Session) OnEnd(f func()) (stop func(), ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended.Load() {
		return func() {}, false
	}
	if u.ending == nil {
		u.ending = map[uint64]func(){}
	}
	u.endSeq++
	seq := u.endSeq
	u.ending[seq] = f
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.ending, seq)
	}, true
}

// runEnding runs what OnEnd was given, in the order it was.
func (u *Session) runEnding() {
	u.mu.Lock()
	fs := u.ending
	u.ending = nil
	u.mu.Unlock()
	for _, seq := range slices.Sorted(maps.Keys(fs)) {
		fs[seq]()
	}
}

// MCP is the session mcp-go registered for u, or nil.
func (u *Session) MCP() server.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cs
}

// ClientCaps are the capabilities the client declared in initialize,
// which mcp-go keeps on its session.
func (u *Session) ClientCaps() mcp.ClientCapabilities {
	if ci, ok := u.MCP().(server.SessionWithClientInfo); ok {
		return ci.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

// ProtocolVersion is the protocol version negotiated in the session's
// initialize, which mcp-go keeps on its session; "" before it, or for a
// session without one (a 2026-07-28 request's).
func (u *Session) ProtocolVersion() string {
	if pv, ok := u.MCP().(server.SessionWithProtocolVersion); ok {
		return pv.ProtocolVersion()
	}
	return ""
}

// SetLevel records the log level the session asked for.
func (u *Session) SetLevel(l mcp.LoggingLevel) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.level, u.levelSet = l, true
}

// LogLevel is the log level the session asked for, and whether it asked.
func (u *Session) LogLevel() (mcp.LoggingLevel, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.level, u.levelSet
}

// Listening reports whether one of u's GET streams is open to mcpmux's
// own notifications.
func (u *Session) Listening() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range u.streams {
		s.mu.Lock()
		open := s.open
		s.mu.Unlock()
		if open {
			return true
		}
	}
	return false
}

// Answered reports whether u's initialize answer is out: from then on it
// may be sent what mcpmux sends outside any request.
func (u *Session) Answered() bool { return u.answered.Load() }

// MarkAnswered records that u's initialize answer is written: from now on
// it receives mcpmux's notifications. The stdio edge marks it; an HTTP
// session is marked as mcp-go registers it (Registry.Registered).
func (u *Session) MarkAnswered() { u.answered.Store(true) }

// Out is the stdio client's edge for the stdio session; nil for any other.
func (u *Session) Out() Out { return u.out }

// SessionOut is how what mcpmux sends u outside any request reaches its
// client, requests included: the stdio client's edge, an HTTP session's
// open listening GET stream; nil when there is none (an HTTP session with
// no stream open, a listen stream, which carries notifications only).
func (u *Session) SessionOut() Out {
	switch {
	case u.Kind == KindStdio:
		return u.out
	case u.Kind == KindHTTP && u.Listening():
		return streamOut{u}
	}
	return nil
}
