package upstream

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// Sentinel errors of Admit: which limit refused a new HTTP session.
var (
	ErrSessionLimit         = errors.New("too many sessions")
	ErrIdentitySessionLimit = errors.New("too many sessions for this identity")
)

// errUnknownSession is what mcp-go is told of an id sessions does not hold;
// it answers 404.
var errUnknownSession = errors.New("unknown session id")

// sessionIDPrefix is mcp-go's, kept so that ids look as clients expect.
const sessionIDPrefix = "mcp-session-"

// Registry is the one record of upstream sessions: which identity holds
// each, how many each identity and all together hold (the caps), and which
// receive mcpmux's notifications. For HTTP it is also mcp-go's session id
// manager (IDManager), so mcp-go accepts exactly the ids it holds, and a
// session ended here (DELETE, idle expiry, shutdown) is ended in mcp-go by
// the same step. Calls only read it (a sync.Map look-up and atomics); its
// mutex is taken when sessions open and close.
//
// The zero value is ready for stdio; Configure readies it for HTTP.
type Registry struct {
	srv                      *server.MCPServer // where a session's notifications go through mcp-go (UseServer)
	maxTotal, maxPerIdentity int               // 0: no cap
	forget                   func(id string)   // ends an id in mcp-go; set with HTTP
	Observe                  func(string, int) // Observer.Session; set by newServer
	// SealID, when not nil, turns each new HTTP session's random id into
	// the id handed out (with several replicas, one sealed to name this
	// replica as its owner); set before the first session.
	SealID func(local string) string

	mu          sync.Mutex // opening and closing; never calls
	total       int        // HTTP sessions admitted, open or being opened
	perIdentity map[string]int
	// byMCP holds the sessions mcp-go registered (and the listen streams)
	// by mcp-go's session: what its hooks name.
	byMCP map[server.ClientSession]*Session
	// stdioSess is the stdio client's, while ServeStdio serves it.
	stdioSess *Session

	byID sync.Map // id -> *Session, HTTP sessions handed out

	// endings carries the sessions that ended with something to do
	// (OnEnd) to the goroutine that does it, which close stops.
	endMu     sync.Mutex
	endClosed bool
	endings   chan *Session
	endWG     sync.WaitGroup
}

// hand hands u, a session that ended with something left to do (OnEnd),
// to the registry's goroutine that does it, starting it. Once close has
// begun nothing is done: what the Mux keeps of sessions is dropped as a
// whole as it stops.
func (s *Registry) hand(u *Session) {
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.endClosed {
		return
	}
	if s.endings == nil {
		s.endings = make(chan *Session, 64)
		s.endWG.Go(func() {
			for u := range s.endings {
				u.runEnding()
			}
		})
	}
	s.endings <- u
}

// Close stops the goroutine that runs what ended sessions left to do,
// once it has done it.
func (s *Registry) Close() {
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
func (s *Registry) newSession(identity string, kind Kind) *Session {
	return &Session{Identity: identity, Kind: kind, registry: s}
}

// UseServer sets the mcp-go server that holds the sessions it registers.
func (s *Registry) UseServer(srv *server.MCPServer) { s.srv = srv }

// Configure sets what HTTP needs: the caps and the way to end an id in
// mcp-go.
func (s *Registry) Configure(maxTotal, maxPerIdentity int, forget func(string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxTotal, s.maxPerIdentity, s.forget = maxTotal, maxPerIdentity, forget
}

// Admit reserves a new HTTP session for identity, or says which cap
// refuses it (ErrSessionLimit, ErrIdentitySessionLimit). A reservation is
// handed out with open, or given back with release. Nobody else's session
// is ever dropped to make room.
func (s *Registry) Admit(identity string) (*Session, error) {
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
	return s.newSession(identity, KindHTTP), nil
}

// Open hands the reservation u out under id.
func (s *Registry) Open(u *Session, id string, now int64) {
	u.ID = id
	u.seen.Store(now)
	s.byID.Store(id, u)
	if s.Observe != nil {
		s.Observe(u.Identity, 1)
	}
}

// Release gives back a reservation that was never opened.
func (s *Registry) Release(u *Session) {
	u.End()
	s.uncount(u)
}

// uncount frees u's slot and stops its notifications.
func (s *Registry) uncount(u *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.perIdentity[u.Identity]--; s.perIdentity[u.Identity] <= 0 {
		delete(s.perIdentity, u.Identity)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		delete(s.byMCP, u.cs)
	}
}

// Lookup returns the HTTP session with id, or nil.
func (s *Registry) Lookup(id string) *Session {
	if v, ok := s.byID.Load(id); ok {
		return v.(*Session)
	}
	return nil
}

// EndHTTP removes the HTTP session id: it is unknown from now on, its
// listening streams end and its slot is free. It does not touch mcp-go
// (see HTTPUpstream.expire). It reports whether it ended the session.
func (s *Registry) EndHTTP(id string) bool {
	return s.remove(id, (*Session).End)
}

// EndIdleHTTP is endHTTP for a session that is idle (endIfIdle) when the
// sweeper comes to it.
func (s *Registry) EndIdleHTTP(id string, cutoff int64) bool {
	return s.remove(id, func(u *Session) bool { return u.endIfIdle(cutoff) })
}

// remove ends the HTTP session id with end and, if end did, drops it.
func (s *Registry) remove(id string, end func(*Session) bool) bool {
	u := s.Lookup(id)
	if u == nil || !end(u) {
		return false
	}
	s.byID.CompareAndDelete(id, u)
	s.uncount(u)
	if s.Observe != nil {
		s.Observe(u.Identity, -1)
	}
	return true
}

// OpenStdio opens the stdio client's session, of identity, whose edge out
// carries what mcpmux sends it outside any call.
func (s *Registry) OpenStdio(identity string, out Out) *Session {
	u := s.newSession(identity, KindStdio)
	u.out = out
	s.mu.Lock()
	s.stdioSess = u
	s.mu.Unlock()
	if s.Observe != nil {
		s.Observe(identity, 1)
	}
	return u
}

// CloseStdio ends u, the stdio client's session.
func (s *Registry) CloseStdio(u *Session) {
	s.mu.Lock()
	if s.stdioSess == u {
		s.stdioSess = nil
	}
	if cs := u.MCP(); cs != nil && s.byMCP[cs] == u {
		delete(s.byMCP, cs)
	}
	s.mu.Unlock()
	if u.End() && s.Observe != nil {
		s.Observe(u.Identity, -1)
	}
}

// Registered is told of every session mcp-go registers; identity is its
// request's. An HTTP session (its id is one the registry handed out) is
// registered just after its initialize answer is written, and receives
// notifications from then on; the stdio session is registered as its
// edge starts, and receives them once the edge has written its initialize
// answer (Session.MarkAnswered).
func (s *Registry) Registered(cs server.ClientSession, identity string) {
	if strings.HasPrefix(cs.SessionID(), sessionIDPrefix) {
		if !s.listenHTTP(cs, identity) && s.forget != nil {
			// A session mcp-go holds but mcpmux does not (ended while its
			// initialize was answered): mcp-go must not keep it either.
			s.forget(cs.SessionID())
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.stdioSess; u != nil && u.Identity == identity {
		u.mu.Lock()
		u.cs = cs
		u.mu.Unlock()
		s.listen(cs, u)
	}
}

// listen records u under cs, mcp-go's session of it; under s.mu.
func (s *Registry) listen(cs server.ClientSession, u *Session) {
	if s.byMCP == nil {
		s.byMCP = map[server.ClientSession]*Session{}
	}
	s.byMCP[cs] = u
}

// listenHTTP makes cs, the mcp-go session of an HTTP session of identity,
// receive notifications; false if mcpmux holds no such session (unknown,
// another identity's, or ended).
func (s *Registry) listenHTTP(cs server.ClientSession, identity string) bool {
	u := s.Lookup(cs.SessionID())
	if u == nil || u.Identity != identity {
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

// OpenListen records a 2026-07-28 subscriptions/listen stream of identity,
// whose mcp-go session is cs; it has no handshake, and receives from the
// start.
func (s *Registry) OpenListen(cs server.ClientSession, identity string) *Session {
	u := s.newSession(identity, KindListen)
	u.cs = cs
	u.answered.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listen(cs, u)
	return u
}

// CloseListen ends the listen stream whose mcp-go session is cs, if it is
// one.
func (s *Registry) CloseListen(cs server.ClientSession) {
	s.mu.Lock()
	u := s.byMCP[cs]
	if u == nil || u.Kind != KindListen {
		s.mu.Unlock()
		return
	}
	delete(s.byMCP, cs)
	s.mu.Unlock()
	u.End()
}

// OfMCP returns the session mcp-go's session cs is of, or nil.
func (s *Registry) OfMCP(cs server.ClientSession) *Session {
	if cs == nil {
		return nil
	}
	s.mu.Lock()
	u := s.byMCP[cs]
	if u == nil && s.stdioSess != nil && s.stdioSess.MCP() == cs {
		u = s.stdioSess
	}
	s.mu.Unlock()
	if u != nil {
		return u
	}
	// mcp-go hands an HTTP session's requests a session of its own that
	// only shares the id.
	if id := cs.SessionID(); id != "" {
		return s.Lookup(id)
	}
	return nil
}

// Unregistered is told of a session mcp-go Unregistered. An HTTP session
// stays open (only its notifications through mcp-go stop until it is
// registered again: a GET stream that registered it ended); a stdio
// session is ended by ServeStdio.
func (s *Registry) Unregistered(cs server.ClientSession) {
	s.mu.Lock()
	u, ok := s.byMCP[cs]
	if ok && u.Kind == KindHTTP {
		delete(s.byMCP, cs)
	}
	s.mu.Unlock()
	if ok && u.Kind == KindHTTP {
		u.mu.Lock()
		if u.cs == cs {
			u.cs = nil
		}
		u.mu.Unlock()
	}
}

// Idle returns the ids of HTTP sessions with no request in progress whose
// last request ended before cutoff (unix nanoseconds); with all, every
// HTTP session's id. A session may have become busy since: endIdleHTTP
// checks again.
func (s *Registry) Idle(cutoff int64, all bool) []string {
	var out []string
	s.byID.Range(func(k, v any) bool {
		u := v.(*Session)
		if all || u.active.Load() == 0 && u.seen.Load() < cutoff {
			out = append(out, k.(string))
		}
		return true
	})
	return out
}

// Counts reports the HTTP sessions admitted, in all and for identity.
func (s *Registry) Counts(identity string) (total, forIdentity int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.perIdentity[identity]
}

// IDManager is sessions as mcp-go's SessionIdManager: ids are minted at
// random, valid while sessions holds them, and terminating one ends it.
// mcp-go then drops its own state of the session; no record of ended ids
// is kept, since an id sessions does not hold is refused anyway.
type IDManager struct{ s *Registry }

// IDManager is s as mcp-go's session id manager.
func (s *Registry) IDManager() IDManager { return IDManager{s} }

func (m IDManager) Generate() string {
	if m.s.SealID != nil {
		return sessionIDPrefix + m.s.SealID(rand.Text())
	}
	return sessionIDPrefix + rand.Text()
}

func (m IDManager) Validate(id string) (isTerminated bool, err error) {
	if u := m.s.Lookup(id); u == nil || u.ended.Load() {
		return false, errUnknownSession
	}
	return false, nil
}

func (m IDManager) Terminate(id string) (isNotAllowed bool, err error) {
	m.s.EndHTTP(id)
	return false, nil
}

// All returns every session that receives notifications: those whose
// initialize answer is out.
func (s *Registry) All() []*Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Session, 0, len(s.byMCP)+1)
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

// Stdio returns the Stdio client's session, or nil if mcpmux serves none.
func (s *Registry) Stdio() *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdioSess
}

// Held is how many HTTP session ids s holds: none once every session it
// handed out has ended.
func (s *Registry) Held() int {
	n := 0
	s.byID.Range(func(any, any) bool { n++; return true })
	return n
}
