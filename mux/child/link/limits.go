package link

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// ErrMessageTooLarge is wrapped by every error about a message from a child
// that is over max_message_bytes, and gives it its reason.
var ErrMessageTooLarge = Failure(ReasonMessageTooLarge, errors.New("exceeded max_message_bytes"))

// tooLargeError names the limit a message from a child went over.
func tooLargeError(limit int64) error {
	return fmt.Errorf("a message %w (%s)", ErrMessageTooLarge, config.FormatSize(limit))
}

// oversizedCode and oversizedMessage make up the error response lineReader
// puts in place of a child's answer over max_message_bytes; session.send
// knows it by both (isDropped) and reports errMessageTooLarge. A child that
// forges it only misreports its own answer.
const (
	oversizedCode    = -32090
	oversizedMessage = "mcpmux: the answer exceeded max_message_bytes and was dropped"
)

// IsDropped reports whether e is the error response lineReader puts in
// place of an answer over the limit.
func IsDropped(e *mcp.JSONRPCErrorDetails) bool {
	return e != nil && e.Code == oversizedCode && e.Message == oversizedMessage
}

// LineReader passes a stdio child's stdout through to mcp-go's transport,
// and closes eof when it fails or ends. A line longer than limit costs only
// that line: mcp-go gets its first limit bytes and an end (a fragment it
// cannot parse, and skips), the rest is read and dropped without being
// held, and in its place comes an error response of mcpmux's own under the
// line's id when its first bytes show an answer with one, so that the one
// call it answered fails and the child's session goes on. mcp-go collects a
// line in fragments and then joins them, so it holds at most about twice
// limit while it reads one.
type LineReader struct {
	br    *bufio.Reader
	limit int64
	eof   chan struct{}
	once  sync.Once
	log   zerolog.Logger

	lineLen  int64  // bytes of the current line handed on so far
	head     []byte // the start of the current line, while it is not in one read
	dropping bool   // the current line went over limit; the rest is skipped
	told     bool   // mcp-go has had the error response for it
	own      []byte // mcpmux's own bytes, handed on before anything else
	err      error
}

func NewLineReader(r io.Reader, limit int64, eof chan struct{}, log zerolog.Logger) *LineReader {
	return &LineReader{br: bufio.NewReaderSize(r, 64<<10), limit: limit, eof: eof, log: log}
}

func (l *LineReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(l.own) == 0 {
		switch {
		case l.err != nil:
			l.once.Do(func() { close(l.eof) })
			return 0, l.err
		case l.dropping && !l.told:
			l.own, l.told = l.oversized(), true
		case l.dropping:
			l.skip()
		default:
			if n := l.pass(p); n > 0 {
				return n, nil
			}
		}
	}
	n := copy(p, l.own)
	l.own = l.own[n:]
	return n, nil
}

// pass hands on into p what is buffered of lines within the limit, up to
// the point where a line goes over it.
func (l *LineReader) pass(p []byte) int {
	if _, err := l.br.Peek(1); err != nil {
		l.err = err
		return 0
	}
	chunk, _ := l.br.Peek(min(len(p), l.br.Buffered()))
	n := 0
	for n < len(chunk) {
		end, content := len(chunk), int64(len(chunk)-n)
		if i := bytes.IndexByte(chunk[n:], '\n'); i >= 0 {
			end, content = n+i+1, int64(i)
		}
		if l.lineLen+content > l.limit {
			fit := n + int(l.limit-l.lineLen)
			l.keepHead(chunk[n:fit])
			n, l.dropping = fit, true
			break
		}
		if chunk[end-1] != '\n' {
			l.keepHead(chunk[n:end])
			l.lineLen += content
			n = end
			break
		}
		n, l.lineLen, l.head = end, 0, l.head[:0]
	}
	copy(p, chunk[:n])
	_, _ = l.br.Discard(n)
	return n
}

// keepHead keeps the first oversizedHead bytes of a line that is not
// handed on in one read, in case it goes over the limit.
func (l *LineReader) keepHead(b []byte) {
	if room := frame.OversizedHead - len(l.head); room > 0 {
		l.head = append(l.head, b[:min(len(b), room)]...)
	}
}

// skip reads the rest of a line over the limit and drops it.
func (l *LineReader) skip() {
	for {
		_, err := l.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			l.err = err
			return
		}
		l.lineLen, l.head, l.dropping, l.told = 0, l.head[:0], false, false
		return
	}
}

// oversized logs a line over the limit and returns what mcp-go gets in its
// place: the end of the fragment it has, and the error response for an
// answer whose id the line's start shows.
func (l *LineReader) oversized() []byte {
	id, method := jsonwire.HeadFields(l.head)
	answer := id != nil && !method
	ev := l.log.Error().Int64("max_message_bytes", l.limit)
	if id != nil {
		ev = ev.RawJSON("id", id)
	}
	ev.Bool("answer", answer).Msg("server sent a message over max_message_bytes; it was dropped")
	// A NUL is invalid anywhere in JSON: the fragment never parses, even
	// when what fit happens to be a whole message.
	cut := []byte("\x00\n")
	if !answer {
		return cut
	}
	msg, _ := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error":   map[string]any{"code": oversizedCode, "message": oversizedMessage},
	})
	return append(append(cut, msg...), '\n')
}

// requestNoteKey marks a request's context with the note its HTTP
// exchange leaves for session.send: mcp-go does not always pass a body's
// error on (an event stream that breaks off is "unexpected nil response"),
// and tells an HTTP status only in an error's text.
type requestNoteKey struct{}

// RequestNote is what the HTTP client of a remote child learned of one
// request. It is written by the transport's goroutines and read once the
// request is over.
type RequestNote struct {
	method   string      // the JSON-RPC method, for the log
	TooLarge atomic.Bool // a message of the response went over the limit
	// status is that of an answer other than 200, 202 and 404, which fails
	// the request (0: none); redirect is set for a 3xx.
	status   atomic.Int32
	redirect atomic.Bool
}

func WithRequestNote(ctx context.Context, method string) (context.Context, *RequestNote) {
	note := &RequestNote{method: method}
	return context.WithValue(ctx, requestNoteKey{}, note), note
}

// StatusErr returns the error for a request whose answer had an HTTP
// status that fails it, or nil.
func (n *RequestNote) StatusErr() error {
	if code := n.status.Load(); code != 0 {
		return &HTTPStatusError{Code: int(code), Redirect: n.redirect.Load()}
	}
	return nil
}

// HTTPStatusError is the failure of a request a remote child answered
// with an HTTP status other than 200 and 202 (a 404 instead ends the
// session): that request failed, and the session goes on. It never holds
// the answer's body, nor where a redirect points to.
type HTTPStatusError struct {
	Code     int
	Redirect bool
}

func (e *HTTPStatusError) Error() string {
	if e.Redirect {
		return fmt.Sprintf("answered with HTTP status %d, a redirect, which mcpmux does not follow", e.Code)
	}
	return fmt.Sprintf("answered with HTTP status %d", e.Code)
}

// LimitedClient returns an HTTP client for a remote child whose response
// bodies fail past limit: a JSON body as a whole, an event stream per event
// (a stream stays open for as long as the child likes). It follows no
// redirect: a 3xx, like any status other than 200, 202 and 404, fails the
// request it answers, and the body of such an answer is dropped unread, so
// that what a remote server writes there (a stack trace, a secret) reaches
// neither mcp-go's errors nor the log.
func LimitedClient(limit int64, log zerolog.Logger) *http.Client {
	return &http.Client{
		Transport: &limitedTransport{next: http.DefaultTransport, limit: limit, log: log},
		// limitedTransport already takes the Location away; this holds
		// should anything bring it back.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type limitedTransport struct {
	next  http.RoundTripper
	limit int64
	log   zerolog.Logger
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(withStaleCheck(req))
	if err != nil {
		return resp, notSent(err)
	}
	note, _ := req.Context().Value(requestNoteKey{}).(*RequestNote)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
	case http.StatusNotFound:
		// The session is gone (mcp-go ends it), or a GET stream is not
		// offered; the body is not read either way.
		t.drop(resp)
		return resp, nil
	default:
		t.failing(req, resp, note)
		return resp, nil
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var flag *atomic.Bool
	if note != nil {
		flag = &note.TooLarge
	}
	resp.Body = &limitedBody{
		rc: resp.Body, limit: t.limit, events: mediaType == "text/event-stream",
		flag: flag, log: t.log, method: req.Method, lineEmpty: true,
	}
	return resp, nil
}

// failing takes the body of an answer whose status fails its request, and
// a redirect's Location, away from mcp-go, notes the status for the
// request's session.send, and logs it for a POST (a GET stream or a
// DELETE that fails is mcp-go's to retry or to give up).
func (t *limitedTransport) failing(req *http.Request, resp *http.Response, note *RequestNote) {
	t.drop(resp)
	redirect := resp.StatusCode >= 300 && resp.StatusCode < 400
	origin := ""
	if loc := resp.Header.Get("Location"); loc != "" {
		origin = "unreadable"
		if u, err := req.URL.Parse(loc); err == nil && u.Host != "" {
			origin = u.Scheme + "://" + u.Host
		}
		resp.Header.Del("Location")
	}
	if note != nil {
		note.status.Store(int32(resp.StatusCode))
		note.redirect.Store(redirect)
	}
	if req.Method != http.MethodPost {
		return
	}
	ev := t.log.Warn().Ctx(req.Context()).Int("status", resp.StatusCode)
	if note != nil && note.method != "" {
		ev = ev.Str("request", note.method)
	}
	if redirect {
		ev.Str("location_origin", origin).Msg("server answered with a redirect, which mcpmux does not follow")
		return
	}
	ev.Msg("server answered a request with an HTTP error status")
}

// drop closes resp's body unread and puts an empty one in its place.
func (t *limitedTransport) drop(resp *http.Response) {
	_ = resp.Body.Close()
	resp.Body = http.NoBody
}

// limitedBody fails once a message goes over limit: the whole body, or with
// events, one event (the lines up to an empty one, as mcp-go splits them:
// at '\n', with '\r' trimmed).
type limitedBody struct {
	rc     io.ReadCloser
	limit  int64
	events bool
	flag   *atomic.Bool // of the request, if it has one
	log    zerolog.Logger
	method string

	n         int64 // bytes of the current message
	lineEmpty bool  // the current line has nothing but '\r' so far
	err       error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	over := -1 // index of the first byte over the limit
	if !b.events {
		if b.n += int64(n); b.n > b.limit {
			over = n - int(b.n-b.limit)
		}
	} else {
		for i, c := range p[:n] {
			switch c {
			case '\n':
				if b.lineEmpty {
					b.n = 0 // an empty line ends the event
				}
				b.lineEmpty = true
				continue
			case '\r':
			default:
				b.lineEmpty = false
			}
			if b.n++; b.n > b.limit {
				over = i
				break
			}
		}
	}
	if over < 0 {
		return n, err
	}
	b.err = tooLargeError(b.limit)
	if b.flag != nil {
		b.flag.Store(true)
	}
	b.log.Error().Int64("max_message_bytes", b.limit).Str("http_method", b.method).Bool("event_stream", b.events).
		Msg("server sent a message over max_message_bytes; it was dropped")
	// What came before the message still counts; the message never ends.
	return over, b.err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
