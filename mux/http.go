package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
)

// ErrShuttingDown is the cause given to calls cut off because mcpmux is
// stopping; their callers are told so.
var ErrShuttingDown = errors.New("mcpmux is shutting down")

// HTTPOptions configure the streamable HTTP upstream.
type HTTPOptions struct {
	// Path is where MCP is served.
	Path string
	// SessionIdleTimeout ends sessions with no request for this long; a
	// client that comes back is told 404 and initializes again.
	SessionIdleTimeout time.Duration
	// Limits bound what one request may make mcpmux read, hold and wait
	// for: MaxBodyBytes, ReadTimeout (the body), WriteTimeout (each write
	// to the client), MaxSessions and MaxSessionsPerIdentity. Zero values
	// mean no bound.
	Limits config.Limits
}

// HTTPUpstream serves MCP over streamable HTTP. Each request must carry its
// caller's identity in its context (WithIdentity), put there by whatever
// authenticated it.
//
// A session belongs to the identity that opened it, and the Mux's session
// registry is the only record of it: a request naming a session id the
// registry does not hold for the caller's identity is 404, whatever mcp-go
// still keeps, and mcp-go is made to forget every session the registry
// ends.
type HTTPUpstream struct {
	srv      *server.StreamableHTTPServer
	sessions *sessions
	log      zerolog.Logger
	idle     time.Duration
	limits   config.Limits

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// httpRequestKey marks the context of a request served by an HTTPUpstream,
// so that the session hooks know where a session came from.
type httpRequestKey struct{}

// NewHTTPUpstream builds the streamable HTTP upstream on the mux's server.
// DNS-rebinding protection (Host checks on loopback) stays on. Shutdown
// stops it. A Mux has at most one.
func (m *Mux) NewHTTPUpstream(o HTTPOptions) *HTTPUpstream {
	log := m.log.With().Str("component", "http").Logger()
	h := &HTTPUpstream{
		sessions: &m.sessions,
		log:      log,
		idle:     o.SessionIdleTimeout,
		limits:   o.Limits,
		stop:     make(chan struct{}),
	}
	// No WithSessionIdleTTL: expiry is the registry's, and reaches mcp-go
	// through expire.
	h.srv = server.NewStreamableHTTPServer(m.srv,
		server.WithEndpointPath(o.Path),
		server.WithSessionIdManager(idManager{s: h.sessions}),
		server.WithStreamableHTTPLogger(slog.New(zerolog.NewSlogHandler(log))),
	)
	h.sessions.configure(o.Limits.MaxSessions, o.Limits.MaxSessionsPerIdentity, h.expire)
	if h.idle > 0 {
		h.wg.Go(h.sweep)
	}
	return h
}

// ServeHTTP serves one MCP request.
func (h *HTTPUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !allowedOrigin(origin, r.Host) {
		h.log.Warn().Str("origin", origin).Msg("request refused: cross-origin")
		http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		var ok bool
		if body, ok = h.readBody(w, r); !ok {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	identity := IdentityFrom(r.Context())
	rec := &recorder{ResponseWriter: w, rc: http.NewResponseController(w), write: h.limits.WriteTimeout, h: h}
	ctx := context.WithValue(r.Context(), httpRequestKey{}, true)

	sid := r.Header.Get(server.HeaderKeySessionID)
	switch {
	case r.Method == http.MethodPost && isInitialize(body):
		// A new session, whatever id the request names: mcp-go mints one.
		u, err := h.sessions.admit(identity)
		if err != nil {
			h.refuseSession(w, identity, err)
			return
		}
		rec.pending = u
		defer rec.settle()
	case sid != "":
		u := h.sessions.lookup(sid)
		if u != nil && u.identity != identity {
			h.log.Warn().Str("identity", identity).Str("method", r.Method).Msg("request refused: the session belongs to another identity")
			u = nil
		}
		if u == nil || !u.begin(time.Now().UnixNano()) {
			// The same answer for a session that never existed, ended, or
			// is someone else's.
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
		defer func() { u.finish(time.Now().UnixNano()) }()
		if r.Method == http.MethodGet {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			remove, ok := u.addStream(cancel)
			if !ok {
				http.Error(w, "Session not found", http.StatusNotFound)
				return
			}
			defer remove()
		}
	case r.Method == http.MethodGet || r.Method == http.MethodDelete:
		// A listening stream joins, and a DELETE ends, a session that
		// initialize opened; mcp-go would otherwise open one for no id.
		http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
		return
	}
	h.srv.ServeHTTP(rec, r.WithContext(ctx))
}

// readBody reads a POST's body within max_body_bytes and read_timeout. A
// declared length over the limit is refused before a byte is read; a body
// that turns out longer is refused once the limit is reached; either way
// the connection is closed rather than drained. It answers the request
// itself when it returns false.
func (h *HTTPUpstream) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	limit := h.limits.MaxBodyBytes
	if limit > 0 && r.ContentLength > limit {
		h.tooLarge(w, r, limit)
		return nil, false
	}
	rc := http.NewResponseController(w)
	if d := h.limits.ReadTimeout; d > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d))
		// Cleared once the body is in: the answer may take long, and the
		// connection's read side must not end it.
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	var rd io.Reader = r.Body
	if limit > 0 {
		rd = http.MaxBytesReader(w, r.Body, limit)
	}
	body, err := readChunked(rd, r.ContentLength)
	var tooLong *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.As(err, &tooLong):
		h.tooLarge(w, r, limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		h.log.Warn().Str("identity", IdentityFrom(r.Context())).Dur("read_timeout", h.limits.ReadTimeout).Msg("request refused: its body was not sent within read_timeout")
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("Request Timeout: the body did not arrive within read_timeout (%s)", h.limits.ReadTimeout), http.StatusRequestTimeout)
	default:
		w.Header().Set("Connection", "close")
		http.Error(w, "Bad Request: could not read the request body", http.StatusBadRequest)
	}
	return nil, false
}

// readChunked reads r to its end. With the length known it reads into one
// buffer of that size; otherwise it keeps what arrives in chunks and joins
// them at the end, so that a body refused half way has cost what it sent
// and no more (a growing buffer would have cost up to twice that).
func readChunked(r io.Reader, length int64) ([]byte, error) {
	if length >= 0 {
		buf := make([]byte, length)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	const chunk = 64 << 10
	var parts [][]byte
	total := 0
	for {
		b := make([]byte, chunk)
		n, err := io.ReadFull(r, b)
		parts = append(parts, b[:n])
		total += n
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return bytes.Join(parts, nil), nil
}

func (h *HTTPUpstream) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	h.log.Warn().Str("identity", IdentityFrom(r.Context())).Int64("content_length", r.ContentLength).Int64("max_body_bytes", limit).Msg("request refused: body too large")
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("Request Entity Too Large: the body is over max_body_bytes (%d bytes)", limit), http.StatusRequestEntityTooLarge)
}

// refuseSession answers an initialize that a session cap refused: 503 when
// mcpmux holds all the sessions it may, 429 when the caller's identity
// holds all of its own.
func (h *HTTPUpstream) refuseSession(w http.ResponseWriter, identity string, err error) {
	h.log.Warn().Str("identity", identity).Err(err).Msg("new session refused")
	code := http.StatusServiceUnavailable
	if errors.Is(err, ErrIdentitySessionLimit) {
		code = http.StatusTooManyRequests
	}
	w.Header().Set("Retry-After", "60")
	http.Error(w, http.StatusText(code)+": new session refused: "+err.Error(), code)
}

// isInitialize reports whether a POST body is an initialize request, as
// mcp-go decides it.
func isInitialize(body []byte) bool {
	if !bytes.Contains(body, []byte(`"initialize"`)) {
		return false
	}
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &msg) == nil && msg.Method == string(mcp.MethodInitialize)
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
// shutting down is not held up by them, ends every session, and stops the
// sweeper.
func (h *HTTPUpstream) Shutdown(ctx context.Context) {
	h.once.Do(func() { close(h.stop) })
	h.wg.Wait()
	_ = h.srv.Shutdown(ctx) // it owns no http.Server here, so only sessions close
	for _, id := range h.sessions.idle(0, true) {
		h.expire(id)
	}
}

// expire ends session id in the registry and in mcp-go, through mcp-go's
// own DELETE handling, which drops everything mcp-go keeps of it.
func (h *HTTPUpstream) expire(id string) {
	h.sessions.endHTTP(id)
	h.srv.Handle(discard{header: http.Header{}}, &server.HTTPRequest{
		Method:  http.MethodDelete,
		Header:  http.Header{server.HeaderKeySessionID: {id}},
		Context: context.Background(),
	})
}

// sweep ends sessions that have had no request in progress for the idle
// timeout.
func (h *HTTPUpstream) sweep() {
	t := time.NewTicker(max(h.idle/2, time.Second))
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-t.C:
			for _, id := range h.sessions.idle(now.Add(-h.idle).UnixNano(), false) {
				h.log.Info().Str("session", id).Dur("session_idle_timeout", h.idle).Msg("idle session ended")
				h.expire(id)
			}
		}
	}
}

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
	status  int
	pending *upstreamSession // admitted for this initialize, not yet handed out
	orphan  string           // an id mcp-go handed out that the registry does not hold
}

func (s *recorder) WriteHeader(code int) {
	if s.status != 0 {
		s.ResponseWriter.WriteHeader(code)
		return
	}
	s.status = code
	if sid := s.Header().Get(server.HeaderKeySessionID); sid != "" {
		switch {
		case s.pending != nil && code < 300:
			s.h.sessions.open(s.pending, sid, time.Now().UnixNano())
			s.pending = nil
		default:
			// Never let out an id that is not in the registry.
			s.Header().Del(server.HeaderKeySessionID)
			s.orphan = sid
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

// settle runs when the request is over: a reservation not handed out is
// given back, and a session mcp-go opened without the registry is ended.
func (s *recorder) settle() {
	if s.pending != nil {
		s.h.sessions.release(s.pending)
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

func (s *recorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	s.extend()
	return s.ResponseWriter.Write(b)
}

// Flush keeps server-sent events flowing through the recorder.
func (s *recorder) Flush() {
	s.extend()
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *recorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// discard is the ResponseWriter of mcpmux's own requests to mcp-go.
type discard struct{ header http.Header }

func (d discard) Header() http.Header       { return d.header }
func (discard) WriteHeader(int)             {}
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) Flush()                      {}
func (discard) CanStream() bool             { return false }
