package mux

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
)

// ErrShuttingDown is the cause given to calls cut off because mcpmux is
// stopping; their callers are told so.
var ErrShuttingDown = errors.New("mcpmux is shutting down")

// HTTPOptions configure the streamable HTTP upstream.
type HTTPOptions struct {
	// Path is where MCP is served.
	Path string
	// SessionIdleTimeout drops sessions idle this long; a client that comes
	// back initializes again.
	SessionIdleTimeout time.Duration
}

// HTTPUpstream serves MCP over streamable HTTP. Each request must carry its
// caller's identity in its context (WithIdentity), put there by whatever
// authenticated it.
//
// A session belongs to the identity that opened it: mcp-go finds sessions
// by their id alone, so without this anyone holding another caller's
// session id could listen to its notifications or end it.
type HTTPUpstream struct {
	srv    *server.StreamableHTTPServer
	log    zerolog.Logger
	idle   time.Duration
	owners sync.Map // session id -> *owner

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

type owner struct {
	identity string
	seen     atomic.Int64 // unix nanoseconds of the last request
}

// NewHTTPUpstream builds the streamable HTTP upstream on the mux's server.
// DNS-rebinding protection (Host checks on loopback) stays on. Shutdown
// stops it.
func (m *Mux) NewHTTPUpstream(o HTTPOptions) *HTTPUpstream {
	h := &HTTPUpstream{
		srv: server.NewStreamableHTTPServer(m.srv,
			server.WithEndpointPath(o.Path),
			server.WithStateful(true),
			server.WithSessionIdleTTL(o.SessionIdleTimeout),
			server.WithStreamableHTTPLogger(slog.New(zerolog.NewSlogHandler(m.log.With().Str("component", "http").Logger()))),
		),
		log:  m.log.With().Str("component", "http").Logger(),
		idle: o.SessionIdleTimeout,
		stop: make(chan struct{}),
	}
	h.wg.Go(h.sweep)
	return h
}

// ServeHTTP serves one MCP request.
func (h *HTTPUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !allowedOrigin(origin, r.Host) {
		h.log.Warn().Str("origin", origin).Msg("request refused: cross-origin")
		http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
		return
	}
	identity := IdentityFrom(r.Context())
	sid := r.Header.Get(server.HeaderKeySessionID)
	if r.Method == http.MethodGet {
		// A listening stream joins a session that initialize opened; mcp-go
		// would otherwise open one for any id, or none.
		if sid == "" {
			http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
			return
		}
		if _, ok := h.owners.Load(sid); !ok {
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
	}
	if sid != "" {
		if v, ok := h.owners.Load(sid); ok {
			o := v.(*owner)
			if o.identity != identity {
				// The same answer as for a session that does not exist.
				h.log.Warn().Str("identity", identity).Str("method", r.Method).Msg("request refused: the session belongs to another identity")
				http.Error(w, "Session not found", http.StatusNotFound)
				return
			}
			o.seen.Store(time.Now().UnixNano())
		}
	}
	rec := &sessionRecorder{ResponseWriter: w, h: h, identity: identity}
	h.srv.ServeHTTP(rec, r)
	if sid != "" && r.Method == http.MethodDelete && rec.status < 300 {
		h.owners.Delete(sid)
	}
}

// allowedOrigin reports whether a browser page at origin may call mcpmux at
// host: only mcpmux's own origin or a loopback one. Without this check a web
// page could drive a local mcpmux (DNS rebinding, cross-site requests);
// clients that are not browsers send no Origin at all.
func allowedOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, host) {
		return true
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// Shutdown ends every client's listening stream, so that an HTTP server
// shutting down is not held up by them, and stops the session sweepers.
func (h *HTTPUpstream) Shutdown(ctx context.Context) {
	h.once.Do(func() { close(h.stop) })
	_ = h.srv.Shutdown(ctx) // it owns no http.Server here, so only sessions close
	h.wg.Wait()
}

// sweep forgets the owners of sessions idle past the timeout; mcp-go ends
// the sessions themselves.
func (h *HTTPUpstream) sweep() {
	t := time.NewTicker(max(h.idle/2, time.Second))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			h.owners.Range(func(k, v any) bool {
				if now.Sub(time.Unix(0, v.(*owner).seen.Load())) > h.idle {
					h.owners.Delete(k)
				}
				return true
			})
		}
	}
}

// sessionRecorder notes the session id a response hands out, so that the
// session is bound to the identity that opened it.
type sessionRecorder struct {
	http.ResponseWriter
	h        *HTTPUpstream
	identity string
	status   int
}

func (s *sessionRecorder) WriteHeader(code int) {
	s.status = code
	if sid := s.Header().Get(server.HeaderKeySessionID); sid != "" && code < 300 {
		o := &owner{identity: s.identity}
		o.seen.Store(time.Now().UnixNano())
		s.h.owners.LoadOrStore(sid, o)
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps server-sent events flowing through the recorder.
func (s *sessionRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *sessionRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
