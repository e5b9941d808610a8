package edge

import (
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/edge/reqid"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// front does what the front end does with f, the message a POST carries,
// and reports whether it answered the POST: a request mcpmux answers
// itself, the client's answer to one of mcpmux's requests, a cancellation
// of a request mcpmux answers. Anything else goes on to mcp-go, as hand
// if that is not nil (takes).
func (h *HTTPUpstream) front(w http.ResponseWriter, r *http.Request, f *frame.Frame) (answered bool, hand []byte) {
	switch {
	case f.Kind == frame.Response:
		u := h.sessionOf(r)
		if u == nil || !u.Asks.Answered(f) {
			return false, nil
		}
		w.WriteHeader(http.StatusAccepted)
		return true, nil
	case isCancellation(f):
		return h.cancelled(w, r, f), nil
	case f.Kind != frame.Request:
		return false, nil
	}
	if u := h.sessionOf(r); u != nil {
		if serve := h.b.TaskResult(u, f); serve != nil {
			h.serveTaskResult(w, r, u, serve)
			return true, nil
		}
	}
	seen := h.lastMeta.Load()
	var cache metaCache
	if seen != nil {
		cache = *seen
	}
	p, meta, perr, ok, hand := takes(r.Context(), f, &cache, h.b)
	if cache.raw != nil && (seen == nil || &cache.raw[0] != &seen.raw[0]) {
		kept := cache // what this request read, for the next
		h.lastMeta.Store(&kept)
	}
	if !ok {
		return false, hand
	}
	h.serveOwned(w, r, f, p, meta, perr)
	return true, nil
}

// serveTaskResult answers r, a tasks/result of session u's for its task t.
func (h *HTTPUpstream) serveTaskResult(w http.ResponseWriter, r *http.Request, u *upstream.Session, serve func(context.Context, upstream.Out) []byte) {
	if !u.Begin(time.Now().UnixNano()) {
		http.Error(w, "Session not found", http.StatusNotFound)
		return
	}
	defer func() { u.Finish(time.Now().UnixNano()) }()
	rec := &ownResponse{w: w, rc: http.NewResponseController(w), write: h.limits.WriteTimeout, log: h.log}
	rec.answer(serve(r.Context(), postOut{rec: rec, u: u}), false, nil)
}

// sessionOf returns the 2025-11-25 session r names, if it is the caller's.
func (h *HTTPUpstream) sessionOf(r *http.Request) *upstream.Session {
	u := h.sessions.Lookup(r.Header.Get(server.HeaderKeySessionID))
	if u == nil || u.Identity != upstream.IdentityFrom(r.Context()) {
		return nil
	}
	return u
}

// serveOwned answers r, which carries f, a request mcpmux answers itself
// (params p, _meta meta, or perr, the error to answer it with), after the
// transport's checks of the protocol era it belongs to: those of mcp-go's
// streamable HTTP server, in its order, so that every request is refused
// alike wherever it goes.
func (h *HTTPUpstream) serveOwned(w http.ResponseWriter, r *http.Request, f *frame.Frame, p frame.Params, meta frame.Meta, perr *frame.Error) {
	if !jsonContentType(r.Header.Get("Content-Type")) {
		http.Error(w, "Invalid content type: must be 'application/json'", http.StatusBadRequest)
		return
	}
	headerVersion := r.Header.Get(mcp.HeaderProtocolVersion)
	modern := meta.Protocol.Modern || mcp.IsModernProtocol(headerVersion)
	writeError := func(status int, e *frame.Error) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(frame.ErrorAnswer(f.ID, e))
	}
	var u *upstream.Session
	if modern {
		if e := modernTransportError(r.Header, meta, headerVersion); e != nil {
			writeError(http.StatusBadRequest, e)
			return
		}
	} else {
		if headerVersion != "" && !mcp.IsValidProtocolVersion(headerVersion) {
			http.Error(w, "Unsupported protocol version: "+headerVersion, http.StatusBadRequest)
			return
		}
		sid := r.Header.Get(server.HeaderKeySessionID)
		if u = h.sessionOf(r); u == nil || !u.Begin(time.Now().UnixNano()) {
			if sid == "" {
				http.Error(w, "Invalid session ID", http.StatusNotFound)
			} else {
				if u == nil && h.sessions.Lookup(sid) != nil {
					h.warn(r).Str("identity", upstream.IdentityFrom(r.Context())).Msg("request refused: the session belongs to another identity")
				}
				http.Error(w, "Session not found", http.StatusNotFound)
			}
			return
		}
		defer func() { u.Finish(time.Now().UnixNano()) }()
	}
	ctx, cancel := context.WithCancel(h.tracing.ExtractHTTP(r.Context(), r.Header))
	defer cancel()
	if u != nil {
		// A 2026-07-28 request has no session, and so no ids in flight
		// beside it: it ends when its connection does.
		dup, _ := reqid.DupKey(f.ID)
		if !u.Calls.Claim(dup, cancel) {
			h.refuseID(w, r, f.ID, reqid.DupIDText)
			return
		}
		defer u.Calls.Release(dup)
	}
	if modern {
		// The headers are the transport's, checked before the body's params.
		if e := standardHeaderError(h, r.Header, meta, f, p); e != nil {
			perr = e
		}
	}
	if perr != nil {
		status := http.StatusOK
		if modern {
			status = frame.HTTPStatus(perr.Code)
		}
		writeError(status, perr)
		return
	}
	rec := &ownResponse{w: w, rc: http.NewResponseController(w), write: h.limits.WriteTimeout, log: h.log}
	req := request(f, p, meta, u, postOut{rec: rec, u: u})
	line, err := h.b.Serve(ctx, req)
	rec.answer(line, modern, err)
}

// jsonContentType reports whether a request's Content-Type is
// application/json, as mime.ParseMediaType reads it; the plain spelling
// every client sends is not parsed.
func jsonContentType(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// modernTransportError is what a 2026-07-28 request must be refused with
// for its transport: a Last-Event-ID, which no stream of that era
// resumes; a protocol version missing from the header or the body, or
// stated differently in them, or one mcpmux does not serve.
func modernTransportError(header http.Header, meta frame.Meta, headerVersion string) *frame.Error {
	metaVersion := meta.Protocol.Version
	switch {
	case header.Get(mcp.HeaderLastEventID) != "":
		return frame.Errorf(mcp.HEADER_MISMATCH, "Last-Event-ID is not supported in protocol version %s: streams are not resumable, re-issue the request with a new ID", mcp.ProtocolVersion20260728)
	case headerVersion == "":
		return frame.Errorf(mcp.HEADER_MISMATCH, "%s header is required for requests carrying %s", mcp.HeaderProtocolVersion, mcp.MetaKeyProtocolVersion)
	case metaVersion == "":
		return frame.Errorf(mcp.INVALID_PARAMS, "missing or invalid _meta field %s", mcp.MetaKeyProtocolVersion)
	case headerVersion != metaVersion:
		return frame.Errorf(mcp.HEADER_MISMATCH, "%s header %s does not match request %s %s", mcp.HeaderProtocolVersion, headerVersion, mcp.MetaKeyProtocolVersion, metaVersion)
	case !mcp.IsValidProtocolVersion(metaVersion):
		e := mcp.UnsupportedProtocolVersionError{Version: metaVersion, Supported: mcp.ValidProtocolVersions}.JSONRPCError()
		data, _ := json.Marshal(e.Error.Data)
		return &frame.Error{Code: e.Error.Code, Message: e.Error.Message, Data: data}
	}
	return nil
}

// standardHeaderError is what a 2026-07-28 request must be refused with
// when its Mcp-Method, Mcp-Name or Mcp-Param-* headers do not say what its
// body does; nil when they do.
func standardHeaderError(h *HTTPUpstream, header http.Header, meta frame.Meta, f *frame.Frame, p frame.Params) *frame.Error {
	if err := mcp.ValidateStandardHeaders(header.Get, meta.Protocol.Version, mcp.MCPMethod(f.Method), f.Params); err != nil {
		return &frame.Error{Code: mcp.HEADER_MISMATCH, Message: err.Error()}
	}
	if f.Method != string(mcp.MethodToolsCall) {
		return nil
	}
	e, ok := h.b.Catalog().Lookup(catalog.KindTool, p.Name)
	if !ok || e.HeaderTool == nil {
		return nil
	}
	lookup := func(name string) (string, bool) {
		v := header.Values(name)
		if len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	if err := mcp.ValidateParamHeadersLookup(lookup, e.HeaderTool, f.Params); err != nil {
		return &frame.Error{Code: mcp.HEADER_MISMATCH, Message: err.Error()}
	}
	return nil
}

// cancelled cancels the request mcpmux answers itself that f, a client's
// notifications/cancelled, names, and reports whether there was one.
func (h *HTTPUpstream) cancelled(w http.ResponseWriter, r *http.Request, f *frame.Frame) bool {
	p, ok := jsonwire.Members(f.Params)
	named := p.Only("requestId")
	u := h.sessionOf(r)
	if !ok || named == nil || u == nil {
		return false
	}
	dup, _ := reqid.DupKey(f.Params[named.Start:named.End])
	if !u.Calls.Cancel(dup) {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// ownResponse is the response to a request mcpmux answers itself: one JSON
// body, or, once something comes before the answer (progress, a log
// message, a request to the client), an event stream. Each write is
// bounded by the write timeout.
type ownResponse struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	write time.Duration
	log   zerolog.Logger

	mu     sync.Mutex
	events bool // the response is an event stream
	done   bool // the answer is written: nothing comes after it
}

// event writes line, a JSON-RPC message, as an event, making the response
// an event stream.
func (o *ownResponse) event(line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return upstream.ErrStreamOver
	}
	if !o.events {
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		o.w.WriteHeader(http.StatusOK)
		o.events = true
	}
	o.extend()
	_, err := o.w.Write(frame.Event(line))
	if err == nil {
		err = o.rc.Flush()
	}
	if err != nil {
		o.failed(err)
	}
	return err
}

// failed logs a write to the client that failed: it stopped reading for
// write_timeout, or went away.
func (o *ownResponse) failed(err error) {
	o.log.Warn().Err(err).Dur("write_timeout", o.write).Msg("could not write to the client: it stopped reading, or went away")
}

// answer writes the answer line: as the stream's last event, or as the
// JSON body, whose status is, for a 2026-07-28 request's error, the one
// the protocol gives its code.
func (o *ownResponse) answer(line []byte, modern bool, e *frame.Error) {
	o.mu.Lock()
	events := o.events
	o.mu.Unlock()
	if events {
		_ = o.event(line)
	} else {
		status := http.StatusOK
		if modern && e != nil {
			status = frame.HTTPStatus(e.Code)
		}
		setJSONHeader(o.w.Header(), len(line))
		o.w.WriteHeader(status)
		o.extend()
		if _, err := o.w.Write(line); err != nil {
			o.failed(err)
		}
	}
	o.mu.Lock()
	o.done = true
	o.mu.Unlock()
}

// jsonType is the Content-Type of a JSON answer, one value shared by
// every answer: net/http only reads a header's values.
var jsonType = []string{"application/json"}

// unchunked is the size from which a JSON answer is sent with its
// Content-Length: net/http sets the length itself of an answer that fits
// its response buffer (2 KiB) and sends a longer one chunked, which costs
// the chunks' framing, a write of its own for the last chunk, and the
// client's reading them.
const unchunked = 2 << 10

// setJSONHeader sets h for a JSON answer of n bytes written in one Write.
func setJSONHeader(h http.Header, n int) {
	h["Content-Type"] = jsonType
	if n >= unchunked {
		h["Content-Length"] = []string{strconv.Itoa(n)}
	}
}

func (o *ownResponse) extend() {
	if o.write > 0 {
		_ = o.rc.SetWriteDeadline(time.Now().Add(o.write))
	}
}

// postOut is the response of a POST as its request's requestOut: what
// mcpmux sends the client during the request goes down it as events;
// u is the request's session (nil for a 2026-07-28 request, which takes no
// requests from a server).
type postOut struct {
	rec *ownResponse
	u   *upstream.Session
}

func (o postOut) Notify(line []byte) { _ = o.rec.event(line) }

func (o postOut) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if o.u == nil {
		return nil, upstream.ErrNoAsk
	}
	return o.u.Asks.Ask(ctx, o.rec.event, method, params)
}
