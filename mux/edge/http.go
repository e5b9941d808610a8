package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/mux/edge/reqid"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// HTTPOptions configure the streamable HTTP upstream.
type HTTPOptions struct {
	// Path is where MCP is served.
	Path string
	// SessionIdleTimeout ends sessions with no request for this long; a
	// client that comes back is told 404 and initializes again.
	SessionIdleTimeout time.Duration
	// Limits bound what one request may make mcpmux read, hold and wait
	// for: MaxBodyBytes and MaxMessageBytes (a body is within both),
	// ReadTimeout (the body), WriteTimeout (each write to the client),
	// MaxSessions and MaxSessionsPerIdentity (2025-11-25 sessions and
	// 2026-07-28 listen streams alike). A zero value means that limit's
	// config default, never no bound.
	Limits config.Limits
}

// HTTPUpstream serves MCP over streamable HTTP. Each request must carry its
// caller's identity in its context (WithIdentity), put there by whatever
// authenticated it.
//
// A session belongs to the identity that opened it, and the session
// registry is the only record of it: a request naming a session id the
// registry does not hold for the caller's identity is 404, whatever mcp-go
// still keeps, and mcp-go is made to forget every session the registry
// ends.
type HTTPUpstream struct {
	b        Backend // answers what the front end takes (httpfront.go)
	srv      *server.StreamableHTTPServer
	core     *server.MCPServer // takes back what a GET stream could not write
	sessions *upstream.Registry
	log      zerolog.Logger
	idle     time.Duration
	limits   config.Limits
	tracing  *telemetry.Tracing // reads the requests' trace context

	standIns atomic.Int64 // stand-in ids handed out (package reqid)
	// lastMeta is the last _meta a 2026-07-28 request carried, as read
	// (frontend.go), for every request of every caller: a client sends
	// the same _meta on each request, which is then decoded once. An
	// entry is never changed once stored.
	lastMeta atomic.Pointer[metaCache]

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// NewHTTPUpstream builds the streamable HTTP upstream on env's mcp-go
// server.
// DNS-rebinding protection (Host checks on loopback) stays on. Shutdown
// stops it. An mcp-go server has at most one.
func NewHTTPUpstream(env Env, o HTTPOptions) *HTTPUpstream {
	log := env.Log.With().Str("component", "http").Logger()
	o.Limits = withDefaults(o.Limits)
	h := &HTTPUpstream{
		b:        env.Backend,
		core:     env.MCP,
		sessions: env.Sessions,
		log:      log,
		idle:     o.SessionIdleTimeout,
		limits:   o.Limits,
		tracing:  env.Tracing,
		stop:     make(chan struct{}),
	}
	// No WithSessionIdleTTL: expiry is the registry's, and reaches mcp-go
	// through expire.
	h.srv = server.NewStreamableHTTPServer(env.MCP,
		server.WithEndpointPath(o.Path),
		server.WithSessionIdManager(h.sessions.IDManager()),
		server.WithStreamableHTTPLogger(liblog.Slog(log)),
	)
	h.SetSessionLimits(o.Limits)
	if h.idle > 0 {
		h.wg.Go(h.sweep)
	}
	return h
}

// withDefaults fills every limit the HTTP upstream enforces that l leaves
// zero with its config default.
func withDefaults(l config.Limits) config.Limits {
	orDefault(&l.MaxBodyBytes, config.DefaultMaxBodyBytes)
	orDefault(&l.MaxMessageBytes, config.DefaultMaxMessageBytes)
	orDefault(&l.ReadTimeout, config.DefaultReadTimeout)
	orDefault(&l.WriteTimeout, config.DefaultWriteTimeout)
	orDefault(&l.MaxSessions, config.DefaultMaxSessions)
	orDefault(&l.MaxSessionsPerIdentity, config.DefaultMaxSessionsPerIdentity)
	return l
}

func orDefault[T int | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// ServeHTTP serves one MCP request.
// SetSessionLimits puts l's max_sessions and max_sessions_per_identity in
// force for the sessions opened from now on; a session already open stays,
// even over a lowered cap.
func (h *HTTPUpstream) SetSessionLimits(l config.Limits) {
	l = withDefaults(l)
	h.sessions.Configure(l.MaxSessions, l.MaxSessionsPerIdentity, h.expire)
}

func (h *HTTPUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if origin := r.Header.Get("Origin"); origin != "" && !allowedOrigin(origin, r.Host) {
		h.warn(r).Str("origin", origin).Msg("request refused: cross-origin")
		http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
		return
	}
	kind := otherMessage
	var msg []byte  // a POST's body
	var id reqid.ID // its id, as the edge reads it (package reqid)
	if r.Method == http.MethodPost {
		b, ok := h.readBody(w, r)
		if !ok {
			return
		}
		msg = b.joined()
		f := frame.Read(msg)
		if f.Refused != nil {
			h.refuseID(w, r, []byte("null"), f.Refused.Message)
			return
		}
		if answered, hand := h.front(w, r, &f); answered {
			return
		} else if hand != nil {
			msg = hand
		}
		switch id = reqid.Read(msg); id.Kind {
		case reqid.BadType:
			h.refuseID(w, r, []byte("null"), reqid.BadIDText)
			return
		case reqid.Null:
			h.refuseID(w, r, []byte("null"), reqid.NullIDText)
			return
		}
		kind = classify(r.Header, body{msg})
	}
	identity := upstream.IdentityFrom(r.Context())
	rec := &recorder{ResponseWriter: w, write: h.limits.WriteTimeout, h: h, header: http.Header{}}
	rec.rc = http.NewResponseController(w)
	defer rec.settle()
	// What mcp-go answers is traced too (relay's hooks): its parent is the
	// headers' trace context, unless the request's _meta carries one.
	ctx := h.tracing.ExtractHTTP(r.Context(), r.Header)

	sid := r.Header.Get(server.HeaderKeySessionID)
	switch {
	case kind == initializeMessage:
		// A new session, whatever id the request names: mcp-go mints one.
		u, err := h.sessions.Admit(identity)
		if err != nil {
			h.refuseSession(w, identity, err)
			return
		}
		rec.pending = u
	case kind == listenMessage:
		// A 2026-07-28 client has no session, but its listen stream holds
		// one in the registry for as long as it is open: it counts against
		// the same caps.
		u, err := h.sessions.Admit(identity)
		if err != nil {
			h.refuseSession(w, identity, err)
			return
		}
		defer h.sessions.Release(u)
	case sid != "":
		u := h.sessions.Lookup(sid)
		if u != nil && u.Identity != identity {
			h.warn(r).Str("identity", identity).Str("method", r.Method).Msg("request refused: the session belongs to another identity")
			u = nil
		}
		if u == nil || !u.Begin(time.Now().UnixNano()) {
			// The same answer for a session that never existed, ended, or
			// is someone else's.
			http.Error(w, "Session not found", http.StatusNotFound)
			return
		}
		defer func() { u.Finish(time.Now().UnixNano()) }()
		if id.Kind == reqid.Request {
			var stand []byte
			if id.Carried {
				stand = reqid.StandIn(h.standIns.Add(1))
			}
			dup := id.DupOf(msg)
			if !u.ClaimID(dup, stand) {
				h.refuseID(w, r, msg[id.At.Start:id.At.End], reqid.DupIDText)
				return
			}
			defer u.ReleaseID(dup)
			if stand != nil {
				rec.carry(msg[id.At.Start:id.At.End], stand)
				msg = jsonwire.WithValue(msg, id.At, stand)
			}
		} else if at, ok := reqid.CancelTarget(msg); ok {
			dup, _ := reqid.DupKey(msg[at.Start:at.End])
			if stand := u.StandInFor(dup); stand != nil {
				msg = jsonwire.WithValue(msg, at, stand) // names the request as mcp-go holds it
			}
		}
		if r.Method == http.MethodGet {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			st := upstream.NewStream(cancel)
			remove, ok := u.AddStream(st)
			if !ok {
				http.Error(w, "Session not found", http.StatusNotFound)
				return
			}
			defer remove()
			rec.stream = st
			var writer sync.WaitGroup
			writer.Go(func() { st.Run(rec.writeStream, func(n upstream.Note) { h.giveBack(u, n) }) })
			defer func() {
				st.Close()
				writer.Wait()
			}()
		}
	case r.Method == http.MethodGet || r.Method == http.MethodDelete:
		// A listening stream joins, and a DELETE ends, a session that
		// initialize opened; mcp-go would otherwise open one for no id.
		http.Error(w, "Bad Request: Mcp-Session-Id header required", http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodPost {
		if id.Kind == reqid.Request && id.Carried && rec.standIn == nil && kind != listenMessage {
			// Outside a session (an initialize, a 2026-07-28 request): no
			// id of it can be in flight, but mcp-go is still handed a
			// stand-in, so that the answer carries the id as written. Not
			// a listen stream's: mcp-go tags every notification of the
			// stream with it.
			stand := reqid.StandIn(h.standIns.Add(1))
			rec.carry(msg[id.At.Start:id.At.End], stand)
			msg = jsonwire.WithValue(msg, id.At, stand)
		}
		r.Body = io.NopCloser(bytes.NewReader(msg))
	}
	h.srv.ServeHTTP(rec, r.WithContext(ctx))
	rec.finish()
}

// refuseID answers a POST refused for its request's id (its JSON, as
// written): 400 with the JSON-RPC error -32600 saying text, as mcp-go
// answers a request it cannot take.
func (h *HTTPUpstream) refuseID(w http.ResponseWriter, r *http.Request, id []byte, text string) {
	h.warn(r).Str("identity", upstream.IdentityFrom(r.Context())).RawJSON("id", jsonwire.Loggable(id)).Str("why", text).Msg("request refused for its id")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(reqid.Refusal(id, text))
}

// giveBack hands mcp-go a notification a GET stream of u could not write;
// a request to the client it cannot take, and it is dropped (its asker
// waits out its time).
func (h *HTTPUpstream) giveBack(u *upstream.Session, n upstream.Note) {
	cs := u.MCP()
	if n.Raw != nil || cs == nil {
		return
	}
	if err := h.core.SendNotificationToClient(h.core.WithContext(context.Background(), cs), n.Method, n.Params); err != nil {
		h.log.Debug().Err(err).Str("method", n.Method).Msg("a notification the GET stream could not write was not queued")
	}
}

// readBody reads a POST's body within max_body_bytes, max_message_bytes
// (the body is one message, or a batch of them) and read_timeout: the whole
// body must be in within read_timeout of the moment mcpmux begins reading
// it, however it trickles. A declared length over the limit is refused
// before a byte is read; a body that turns out longer is refused once the
// limit is reached. What it holds grows with what the client has sent,
// never with what it declared. It answers the request itself when it
// returns false, and then the connection is closed: nothing more of the
// body is read, neither by mcpmux nor by net/http, which would otherwise
// read the rest of a small body, at the client's pace and with no
// deadline, to reuse the connection.
func (h *HTTPUpstream) readBody(w http.ResponseWriter, r *http.Request) (body, bool) {
	rc := http.NewResponseController(w)
	refuse := func() {
		w.Header().Set("Connection", "close")
		// A deadline in the past fails every read from now on at once.
		_ = rc.SetReadDeadline(time.Unix(1, 0))
		lingerOnClose(w)
	}
	limit := min(h.limits.MaxBodyBytes, h.limits.MaxMessageBytes)
	if r.ContentLength > limit {
		refuse()
		h.tooLarge(w, r, limit)
		return nil, false
	}
	// One deadline for the whole body, never extended as bytes arrive.
	_ = rc.SetReadDeadline(time.Now().Add(h.limits.ReadTimeout))
	src := r.Body // a declared length within the limit is all net/http reads
	if r.ContentLength < 0 {
		src = http.MaxBytesReader(w, r.Body, limit)
	}
	b, err := readChunks(src, r.ContentLength)
	if err == nil {
		// Cleared once the body is in: the answer may take long, and the
		// connection's read side must not end it.
		_ = rc.SetReadDeadline(time.Time{})
		// Closed as read to its end, net/http has nothing of it left to
		// discard before the answer.
		_ = r.Body.Close()
		return b, true
	}
	refuse()
	var tooLong *http.MaxBytesError
	switch {
	case errors.As(err, &tooLong):
		h.tooLarge(w, r, limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		h.warn(r).Str("identity", upstream.IdentityFrom(r.Context())).Dur("read_timeout", h.limits.ReadTimeout).Msg("request refused: its body was not sent within read_timeout")
		http.Error(w, fmt.Sprintf("Request Timeout: the body did not arrive within read_timeout (%s)", h.limits.ReadTimeout), http.StatusRequestTimeout)
	default:
		http.Error(w, "Bad Request: could not read the request body", http.StatusBadRequest)
	}
	return nil, false
}

// lingerOnClose asks net/http to half-close the connection once the answer
// is written and to wait a moment before closing it, as it does when a
// MaxBytesReader goes over its limit: a connection closed at once while the
// client is still sending is reset, and the client can lose the refusal it
// was sent. A MaxBytesReader is the one public way to ask for it.
func lingerOnClose(w http.ResponseWriter) {
	_, _ = http.MaxBytesReader(w, io.NopCloser(strings.NewReader("x")), 0).Read(make([]byte, 1))
}

// body is a request body as it was read, in chunks, so that what reading
// it holds grows with what the client has sent.
type body [][]byte

// joined is the body in one slice: its one chunk, or a copy of them all.
func (b body) joined() []byte {
	if len(b) == 1 {
		return b[0]
	}
	return bytes.Join(b, nil)
}

// bodyChunk is the most readChunks allocates before the client has sent it.
const bodyChunk = 64 << 10

// readChunks reads r to its end in chunks of bodyChunk, the first no larger
// than the declared length (-1 when unknown): a client that declares a
// large body and sends little makes mcpmux hold little, and a body refused
// half way has cost what it sent and one chunk more.
func readChunks(r io.Reader, length int64) (body, error) {
	var b body
	for {
		size := int64(bodyChunk)
		if length >= 0 {
			size = min(size, length)
		}
		if size == 0 {
			return b, nil // all of the declared length is in
		}
		c := make([]byte, size)
		n, err := io.ReadFull(r, c)
		if n > 0 {
			b = append(b, c[:n])
		}
		if length >= 0 {
			length -= int64(n)
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) && length < 0:
			return b, nil
		case err != nil:
			return nil, err
		}
	}
}

// reader reads the body from its start.
func (b body) reader() io.Reader {
	if len(b) == 1 {
		return bytes.NewReader(b[0])
	}
	rs := make([]io.Reader, len(b))
	for i, c := range b {
		rs[i] = bytes.NewReader(c)
	}
	return io.MultiReader(rs...)
}

// unmarshal decodes the body into v exactly as json.Unmarshal decodes the
// whole of it.
func (b body) unmarshal(v any) error {
	if len(b) == 1 {
		return json.Unmarshal(b[0], v)
	}
	dec := json.NewDecoder(b.reader())
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid data after the top-level value")
	}
	return nil
}

// tooLarge answers a body over limit, naming the key that set it; readBody
// has marked the connection to be closed.
func (h *HTTPUpstream) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	key := "max_body_bytes"
	if limit < h.limits.MaxBodyBytes {
		key = "max_message_bytes"
	}
	h.warn(r).Str("identity", upstream.IdentityFrom(r.Context())).Int64("content_length", r.ContentLength).Int64(key, limit).Msg("request refused: body too large")
	http.Error(w, fmt.Sprintf("Request Entity Too Large: the body is over %s (%d bytes)", key, limit), http.StatusRequestEntityTooLarge)
}

// refuseSession answers an initialize that a session cap refused: 503 when
// mcpmux holds all the sessions it may, 429 when the caller's identity
// holds all of its own.
func (h *HTTPUpstream) refuseSession(w http.ResponseWriter, identity string, err error) {
	h.log.Warn().Str("identity", identity).Err(err).Msg("new session refused")
	code := http.StatusServiceUnavailable
	if errors.Is(err, upstream.ErrIdentitySessionLimit) {
		code = http.StatusTooManyRequests
	}
	w.Header().Set("Retry-After", "60")
	http.Error(w, http.StatusText(code)+": new session refused: "+err.Error(), code)
}

// messageKind is what a POST body is to the session registry.
type messageKind int

const (
	otherMessage      messageKind = iota
	initializeMessage             // opens a 2025-11-25 session
	listenMessage                 // a 2026-07-28 subscriptions/listen stream
)

// classify decides what a POST body is exactly as mcp-go's handlePost
// does: the method as encoding/json decodes it from the whole body (a batch
// or a body that is not one JSON object is neither), and the protocol era
// from the Mcp-Protocol-Version header and params._meta, an initialize of
// the 2026-07-28 era opening nothing.
//
// Most bodies are neither, and are told so without being decoded: a method
// decodes to one of the two names only if the body holds the name as it is
// or an escape (a backslash) that may spell it.
func classify(header http.Header, b body) messageKind {
	if len(b) == 1 && !mayNameSessionMethod(b[0]) {
		return otherMessage
	}
	return classifyDecoded(header, b)
}

var (
	initializeNeedle = []byte(mcp.MethodInitialize)
	listenNeedle     = []byte(mcp.MethodSubscriptionsListen)
)

// mayNameSessionMethod reports whether a JSON string in msg could decode to
// initialize or subscriptions/listen.
func mayNameSessionMethod(msg []byte) bool {
	return bytes.IndexByte(msg, '\\') >= 0 || bytes.Contains(msg, initializeNeedle) || bytes.Contains(msg, listenNeedle)
}

// classifyDecoded is classify by decoding the body.
func classifyDecoded(header http.Header, b body) messageKind {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method mcp.MCPMethod   `json:"method,omitempty"`
	}
	if b.unmarshal(&msg) != nil || msg.Method != mcp.MethodInitialize && msg.Method != mcp.MethodSubscriptionsListen {
		return otherMessage
	}
	var wrapper struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	var metaVersion string
	if b.unmarshal(&wrapper) == nil {
		metaVersion = wrapper.Params.Meta.ProtocolVersion()
	}
	modern := mcp.IsModernProtocol(metaVersion) || mcp.IsModernProtocol(header.Get(mcp.HeaderProtocolVersion))
	var id any
	if len(msg.ID) > 0 {
		_ = json.Unmarshal(msg.ID, &id)
	}
	switch {
	case msg.Method == mcp.MethodInitialize && !modern:
		return initializeMessage
	case msg.Method == mcp.MethodSubscriptionsListen && modern && id != nil:
		return listenMessage
	}
	return otherMessage
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
	for _, id := range h.sessions.Idle(0, true) {
		h.expire(id)
	}
}

// expire ends session id in the registry and in mcp-go.
func (h *HTTPUpstream) expire(id string) {
	h.sessions.EndHTTP(id)
	h.forget(id)
}

// forget ends session id in mcp-go, through mcp-go's own DELETE handling,
// which drops everything mcp-go keeps of it.
func (h *HTTPUpstream) forget(id string) {
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
			cutoff := now.Add(-h.idle).UnixNano()
			for _, id := range h.sessions.Idle(cutoff, false) {
				if h.sessions.EndIdleHTTP(id, cutoff) {
					h.log.Info().Str("session", id).Dur("session_idle_timeout", h.idle).Msg("idle session ended")
					h.forget(id)
				}
			}
		}
	}
}

// warn is a warning about r, refused before the pipeline: with tracing on
// it carries the trace and span ids of r's traceparent header, so that it
// leads to the client's trace.
func (h *HTTPUpstream) warn(r *http.Request) *zerolog.Event {
	return h.log.Warn().Ctx(h.tracing.ExtractHTTP(r.Context(), r.Header))
}
