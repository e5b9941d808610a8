package mux

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Upstream sessions. sessions is the one record of them: which identity
// holds each, how many each identity and all together hold (the caps), and
// which receive tools/list_changed. For HTTP it is also mcp-go's session id
// manager, so mcp-go accepts exactly the ids it holds: an id not in it is
// unknown to both, and a session ended here (DELETE, idle expiry,
// shutdown) is ended in mcp-go by the same step.
//
// Calls only read it (a sync.Map look-up and atomics); its mutex is taken
// when sessions open and close and when policies change.

// Sentinel errors of admit: which limit refused a new HTTP session.
var (
	ErrSessionLimit         = errors.New("too many sessions")
	ErrIdentitySessionLimit = errors.New("too many sessions for this identity")
)

// errUnknownSession is what mcp-go is told of an id sessions does not hold;
// it answers 404.
var errUnknownSession = errors.New("unknown session id")

// sessionIDPrefix is mcp-go's, kept so that ids look as clients expect.
const sessionIDPrefix = "mcp-session-"

// sessionKind says where an upstream session lives.
type sessionKind int

const (
	kindHTTP   sessionKind = iota // a 2025-11-25 streamable HTTP session, with an id, counted against the caps
	kindStdio                     // the stdio client
	kindListen                    // a 2026-07-28 subscriptions/listen stream, alive while its request is
)

// upstreamSession is one upstream session and its owner.
type upstreamSession struct {
	id       string // set when an HTTP session is handed out; "" otherwise
	identity string
	kind     sessionKind

	// Written under mu, so that a session is never ended as idle while a
	// request begins on it; read without it where a stale answer is
	// harmless (the sweeper's first pass, mcp-go's id check).
	seen   atomic.Int64 // unix nanoseconds of the last request's start or end
	active atomic.Int32 // requests in progress
	ended  atomic.Bool
	// answered is set once the session's initialize answer is written
	// (answered): from then on it receives mcpmux's notifications, and
	// never before, so that nothing reaches a client ahead of that answer.
	answered atomic.Bool

	mu      sync.Mutex           // this session's alone: never shared by others' calls
	cs      server.ClientSession // what mcp-go registered for it; nil before
	streams []*getStream         // listening GET streams in the order they opened, ended with the session
	// out is the stdio client's edge, which carries what mcpmux sends the
	// session outside any call; nil for any other session.
	out requestOut
	// asks are mcpmux's requests to the client waiting for its answers;
	// calls, an HTTP session's requests mcpmux answers itself, in flight.
	asks  asks
	calls callTable
	// level is the log level the session asked for with logging/setLevel;
	// until it asks (levelSet false) it gets every log message.
	level    mcp.LoggingLevel
	levelSet bool
	// ending are what must happen once the session ends (onEnd), run
	// once, by the registry's own goroutine (sessions.endings).
	ending   []func()
	registry *sessions // which runs them; nil runs them at once
	// ids holds the ids of the session's HTTP requests in flight, by their
	// dup form (msgID.dup), each with the stand-in mcp-go was handed for it
	// (nil for none).
	ids map[string][]byte
}

// claimID records a request of the session in flight under an id of dup
// form dup, handed to mcp-go as stand (nil: as it is); false, and nothing
// recorded, if one under an equal id is in flight already.
func (u *upstreamSession) claimID(dup string, stand []byte) bool {
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

// releaseID ends what claimID recorded.
func (u *upstreamSession) releaseID(dup string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.ids, dup)
}

// standInFor returns the stand-in of the session's request in flight under
// an id of dup form dup, or nil.
func (u *upstreamSession) standInFor(dup string) []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ids[dup]
}

// begin notes a request on the session; false if the session has ended.
func (u *upstreamSession) begin(now int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended.Load() {
		return false
	}
	u.active.Add(1)
	u.seen.Store(now)
	return true
}

// finish notes the end of a request begun with begin.
func (u *upstreamSession) finish(now int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen.Store(now)
	u.active.Add(-1)
}

// addStream registers a listening stream, to be ended when the session
// ends and to carry mcpmux's own notifications (offer); it returns a func
// that unregisters it, or false if the session has already ended.
func (u *upstreamSession) addStream(s *getStream) (remove func(), ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended.Load() {
		return nil, false
	}
	u.streams = append(u.streams, s)
	s.owner = u
	return func() {
		u.mu.Lock()
		u.streams = slices.DeleteFunc(u.streams, func(o *getStream) bool { return o == s })
		u.mu.Unlock()
	}, true
}

// offer queues n on the newest of the session's open listening streams
// that has room, so that one note after another takes the same stream;
// taken is false if none is open, and err ErrNotificationChannelBlocked if
// every open one is full.
func (u *upstreamSession) offer(n ownNote) (taken bool, err error) {
	return u.offerExcept(n, nil)
}

// offerExcept is offer on every stream but not.
func (u *upstreamSession) offerExcept(n ownNote, not *getStream) (taken bool, err error) {
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

// end marks the session ended and ends its listening streams; false if it
// had already ended.
func (u *upstreamSession) end() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.endLocked()
}

// endIfIdle is end for a session with no request in progress whose last
// one ended before cutoff (unix nanoseconds); false, and the session goes
// on, otherwise.
func (u *upstreamSession) endIfIdle(cutoff int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.active.Load() > 0 || u.seen.Load() >= cutoff {
		return false
	}
	return u.endLocked()
}

func (u *upstreamSession) endLocked() bool {
	if u.ended.Load() {
		return false
	}
	u.ended.Store(true)
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

// runEnding runs what onEnd registered.
func (u *upstreamSession) runEnding() {
	u.mu.Lock()
	fs := u.ending
	u.ending = nil
	u.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// mcpSession is the session mcp-go registered for u, or nil.
func (u *upstreamSession) mcpSession() server.ClientSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cs
}

// clientCaps are the capabilities the client declared in initialize,
// which mcp-go keeps on its session.
func (u *upstreamSession) clientCaps() mcp.ClientCapabilities {
	if ci, ok := u.mcpSession().(server.SessionWithClientInfo); ok {
		return ci.GetClientCapabilities()
	}
	return mcp.ClientCapabilities{}
}

// setLevel records the log level the session asked for.
func (u *upstreamSession) setLevel(l mcp.LoggingLevel) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.level, u.levelSet = l, true
}

// logLevel is the log level the session asked for, and whether it asked.
func (u *upstreamSession) logLevel() (mcp.LoggingLevel, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.level, u.levelSet
}

// sessions is the registry of upstream sessions; the zero value is ready
// for stdio, and NewHTTPUpstream configures it for HTTP (configure).
type sessions struct {
	maxTotal, maxPerIdentity int               // 0: no cap
	forget                   func(id string)   // ends an id in mcp-go; set with HTTP
	observe                  func(string, int) // Observer.Session; set by newServer
	// ended is what happens once any session ends, for what the Mux keeps
	// per session (subscriptions, tasks); set by newServer.
	ended func(*upstreamSession)

	mu          sync.Mutex // opening and closing; never calls
	total       int        // HTTP sessions admitted, open or being opened
	perIdentity map[string]int
	// byMCP holds the sessions mcp-go registered (and the listen streams)
	// by mcp-go's session: what its hooks name.
	byMCP map[server.ClientSession]*upstreamSession
	// stdioSess is the stdio client's, while ServeStdio serves it.
	stdioSess *upstreamSession

	byID sync.Map // id -> *upstreamSession, HTTP sessions handed out

	// endings carries the sessions that ended with something to do
	// (onEnd) to the goroutine that does it, which close stops.
	endMu     sync.Mutex
	endClosed bool
	endings   chan *upstreamSession
	endWG     sync.WaitGroup
}

// hand hands u, a session that ended with something left to do (onEnd),
// to the registry's goroutine that does it, starting it. Once close has
// begun nothing is done: what the Mux keeps of sessions is dropped as a
// whole as it stops.
func (s *sessions) hand(u *upstreamSession) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.endClosed {
		return
	}
	if s.endings == nil {
		s.endings = make(chan *upstreamSession, 64)
		s.endWG.Go(func() {
			for u := range s.endings {
				u.runEnding()
			}
		})
	}
	s.endings <- u
}

// close stops the goroutine that runs what ended sessions left to do,
// once it has done it.
func (s *sessions) close() {
	s.endMu.Lock()
	s.endClosed = true
	if s.endings != nil {
		close(s.endings)
	}
	s.endMu.Unlock()
	s.endWG.Wait()
}

// newSession is a session of identity of kind, whose end hooks the
// registry runs.
func (s *sessions) newSession(identity string, kind sessionKind) *upstreamSession {
	u := &upstreamSession{identity: identity, kind: kind, registry: s}
	if s.ended != nil {
		u.ending = append(u.ending, func() { s.ended(u) })
	}
	return u
}

// configure sets what HTTP needs: the caps and the way to end an id in
// mcp-go.
func (s *sessions) configure(maxTotal, maxPerIdentity int, forget func(string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxTotal, s.maxPerIdentity, s.forget = maxTotal, maxPerIdentity, forget
}

// admit reserves a new HTTP session for identity, or says which cap
// refuses it (ErrSessionLimit, ErrIdentitySessionLimit). A reservation is
// handed out with open, or given back with release. Nobody else's session
// is ever dropped to make room.
func (s *sessions) admit(identity string) (*upstreamSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The caller's own cap first: it is the one the caller can act on.
	if s.maxPerIdentity > 0 && s.perIdentity[identity] >= s.maxPerIdentity {
		return nil, fmt.Errorf("%w: identity %q holds max_sessions_per_identity (%d)", ErrIdentitySessionLimit, identity, s.maxPerIdentity)
	}
	if s.maxTotal > 0 && s.total >= s.maxTotal {
		return nil, fmt.Errorf("%w: max_sessions (%d) are open", ErrSessionLimit, s.maxTotal)
	}
	if s.perIdentity == nil {
		s.perIdentity = map[string]int{}
	}
	s.total++
	s.perIdentity[identity]++
	return s.newSession(identity, kindHTTP), nil
}

// open hands the reservation u out under id.
func (s *sessions) open(u *upstreamSession, id string, now int64) {
	u.id = id
	u.seen.Store(now)
	s.byID.Store(id, u)
	if s.observe != nil {
		s.observe(u.identity, 1)
	}
}

// release gives back a reservation that was never opened.
func (s *sessions) release(u *upstreamSession) {
	u.end()
	s.uncount(u)
}

// uncount frees u's slot and stops its notifications.
func (s *sessions) uncount(u *upstreamSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.perIdentity[u.identity]--; s.perIdentity[u.identity] <= 0 {
		delete(s.perIdentity, u.identity)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		delete(s.byMCP, u.cs)
	}
}

// lookup returns the HTTP session with id, or nil.
func (s *sessions) lookup(id string) *upstreamSession {
	if v, ok := s.byID.Load(id); ok {
		return v.(*upstreamSession)
	}
	return nil
}

// endHTTP removes the HTTP session id: it is unknown from now on, its
// listening streams end and its slot is free. It does not touch mcp-go
// (see HTTPUpstream.expire). It reports whether it ended the session.
func (s *sessions) endHTTP(id string) bool {
	return s.remove(id, (*upstreamSession).end)
}

// endIdleHTTP is endHTTP for a session that is idle (endIfIdle) when the
// sweeper comes to it.
func (s *sessions) endIdleHTTP(id string, cutoff int64) bool {
	return s.remove(id, func(u *upstreamSession) bool { return u.endIfIdle(cutoff) })
}

// remove ends the HTTP session id with end and, if end did, drops it.
func (s *sessions) remove(id string, end func(*upstreamSession) bool) bool {
	u := s.lookup(id)
	if u == nil || !end(u) {
		return false
	}
	s.byID.CompareAndDelete(id, u)
	s.uncount(u)
	if s.observe != nil {
		s.observe(u.identity, -1)
	}
	return true
}

// openStdio opens the stdio client's session, of identity, whose edge out
// carries what mcpmux sends it outside any call.
func (s *sessions) openStdio(identity string, out requestOut) *upstreamSession {
	u := s.newSession(identity, kindStdio)
	u.out = out
	s.mu.Lock()
	s.stdioSess = u
	s.mu.Unlock()
	if s.observe != nil {
		s.observe(identity, 1)
	}
	return u
}

// closeStdio ends u, the stdio client's session.
func (s *sessions) closeStdio(u *upstreamSession) {
	s.mu.Lock()
	if s.stdioSess == u {
		s.stdioSess = nil
	}
	if cs := u.mcpSession(); cs != nil && s.byMCP[cs] == u {
		delete(s.byMCP, cs)
	}
	s.mu.Unlock()
	if u.end() && s.observe != nil {
		s.observe(u.identity, -1)
	}
}

// registered is told of every session mcp-go registers. viaHTTP says it
// was registered by an HTTP request; identity is its request's. A stdio
// session receives notifications once its initialize answer is written
// (answered); mcp-go registers an HTTP one after writing that answer.
func (s *sessions) registered(cs server.ClientSession, identity string, viaHTTP bool) {
	if !viaHTTP {
		s.mu.Lock()
		defer s.mu.Unlock()
		if u := s.stdioSess; u != nil && u.identity == identity {
			u.mu.Lock()
			u.cs = cs
			u.mu.Unlock()
			s.listen(cs, u)
		}
		return
	}
	if !s.listenHTTP(cs, identity) {
		// A session mcp-go holds but mcpmux does not (ended while its
		// initialize was answered): mcp-go must not keep it either.
		if s.forget != nil {
			s.forget(cs.SessionID())
		}
	}
}

// listen records u under cs, mcp-go's session of it; under s.mu.
func (s *sessions) listen(cs server.ClientSession, u *upstreamSession) {
	if s.byMCP == nil {
		s.byMCP = map[server.ClientSession]*upstreamSession{}
	}
	s.byMCP[cs] = u
}

// answered records that the initialize answer of cs, a session of
// identity, has been written: it receives mcpmux's notifications from now
// on. An HTTP session is one from then too, before mcp-go registers it.
func (s *sessions) answered(cs server.ClientSession, identity string, viaHTTP bool) {
	if viaHTTP {
		s.listenHTTP(cs, identity)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byMCP[cs]; u != nil && u.kind == kindStdio {
		u.answered.Store(true)
	}
}

// listenHTTP makes cs, the mcp-go session of an HTTP session of identity,
// receive notifications; false if mcpmux holds no such session (unknown,
// another identity's, or ended).
func (s *sessions) listenHTTP(cs server.ClientSession, identity string) bool {
	u := s.lookup(cs.SessionID())
	if u == nil || u.identity != identity {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended.Load() {
		return true // ending: not to be listened to, and mcp-go is told by the end
	}
	u.cs = cs
	u.answered.Store(true)
	s.listen(cs, u)
	return true
}

// openListen records a 2026-07-28 subscriptions/listen stream of identity,
// whose mcp-go session is cs; it has no handshake, and receives from the
// start.
func (s *sessions) openListen(cs server.ClientSession, identity string) *upstreamSession {
	u := s.newSession(identity, kindListen)
	u.cs = cs
	u.answered.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listen(cs, u)
	return u
}

// closeListen ends the listen stream whose mcp-go session is cs, if it is
// one.
func (s *sessions) closeListen(cs server.ClientSession) {
	s.mu.Lock()
	u := s.byMCP[cs]
	if u == nil || u.kind != kindListen {
		s.mu.Unlock()
		return
	}
	delete(s.byMCP, cs)
	s.mu.Unlock()
	u.end()
}

// ofMCP returns the session mcp-go's session cs is of, or nil.
func (s *sessions) ofMCP(cs server.ClientSession) *upstreamSession {
	if cs == nil {
		return nil
	}
	s.mu.Lock()
	u := s.byMCP[cs]
	if u == nil && s.stdioSess != nil && s.stdioSess.mcpSession() == cs {
		u = s.stdioSess
	}
	s.mu.Unlock()
	if u != nil {
		return u
	}
	// mcp-go hands an HTTP session's requests a session of its own that
	// only shares the id.
	if id := cs.SessionID(); id != "" {
		return s.lookup(id)
	}
	return nil
}

// unregistered is told of a session mcp-go unregistered. An HTTP session
// stays open (only its notifications through mcp-go stop until it is
// registered again: a GET stream that registered it ended); a stdio
// session is ended by ServeStdio.
func (s *sessions) unregistered(cs server.ClientSession) {
	s.mu.Lock()
	u, ok := s.byMCP[cs]
	if ok && u.kind == kindHTTP {
		delete(s.byMCP, cs)
	}
	s.mu.Unlock()
	if ok && u.kind == kindHTTP {
		u.mu.Lock()
		if u.cs == cs {
			u.cs = nil
		}
		u.mu.Unlock()
	}
}

// idle returns the ids of HTTP sessions with no request in progress whose
// last request ended before cutoff (unix nanoseconds); with all, every
// HTTP session's id. A session may have become busy since: endIdleHTTP
// checks again.
func (s *sessions) idle(cutoff int64, all bool) []string {
	var out []string
	s.byID.Range(func(k, v any) bool {
		u := v.(*upstreamSession)
		if all || u.active.Load() == 0 && u.seen.Load() < cutoff {
			out = append(out, k.(string))
		}
		return true
	})
	return out
}

// counts reports the HTTP sessions admitted, in all and for identity.
func (s *sessions) counts(identity string) (total, forIdentity int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.perIdentity[identity]
}

// idManager is sessions as mcp-go's SessionIdManager: ids are minted at
// random, valid while sessions holds them, and terminating one ends it.
// mcp-go then drops its own state of the session; no record of ended ids
// is kept, since an id sessions does not hold is refused anyway.
type idManager struct{ s *sessions }

func (idManager) Generate() string { return sessionIDPrefix + rand.Text() }

func (m idManager) Validate(id string) (isTerminated bool, err error) {
	if u := m.s.lookup(id); u == nil || u.ended.Load() {
		return false, errUnknownSession
	}
	return false, nil
}

func (m idManager) Terminate(id string) (isNotAllowed bool, err error) {
	m.s.endHTTP(id)
	return false, nil
}

// all returns every session that receives notifications: those whose
// initialize answer is out.
func (s *sessions) all() []*upstreamSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*upstreamSession, 0, len(s.byMCP)+1)
	seen := false
	for _, u := range s.byMCP {
		if u.answered.Load() {
			out = append(out, u)
			seen = seen || u == s.stdioSess
		}
	}
	if u := s.stdioSess; u != nil && !seen && u.answered.Load() {
		out = append(out, u)
	}
	return out
}

// stdio returns the stdio client's session, or nil if mcpmux serves none.
func (s *sessions) stdio() *upstreamSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdioSess
}

// streamOpen reports whether one of u's GET streams is open to mcpmux's
// own notifications.
func (u *upstreamSession) streamOpen() bool {
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

// sessionOut is how what mcpmux sends u outside any request reaches its
// client, requests included: the stdio client's edge, an HTTP session's
// open listening GET stream; nil when there is none (an HTTP session with
// no stream open, a listen stream, which carries notifications only).
func (u *upstreamSession) sessionOut() requestOut {
	switch {
	case u.kind == kindStdio:
		return u.out
	case u.kind == kindHTTP && u.streamOpen():
		return streamOut{u}
	}
	return nil
}

// streamOut carries what mcpmux sends an HTTP session down its open GET
// streams.
type streamOut struct{ u *upstreamSession }

func (s streamOut) notify(line []byte) { _, _ = s.u.offer(ownNote{raw: line}) }

func (s streamOut) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return s.u.asks.ask(ctx, func(line []byte) error {
		taken, err := s.u.offer(ownNote{raw: line})
		if !taken {
			return errNoAsk
		}
		return err
	}, method, params)
}
