package mux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
)

// errMessageTooLarge is wrapped by every error about a message from a child
// that is over max_message_bytes.
var errMessageTooLarge = errors.New("exceeded max_message_bytes")

// tooLargeError names the limit a message from a child went over.
func tooLargeError(limit int64) error {
	return fmt.Errorf("a message %w (%s)", errMessageTooLarge, config.FormatSize(limit))
}

// lineReader passes a stdio child's stdout through, closes eof when it fails
// or ends, and ends it at a line longer than limit: the child broke the
// protocol or is hostile, and its session is ended there. mcp-go's reader
// collects a line in fragments and then joins them, so it holds at most
// about twice limit while it reads one.
type lineReader struct {
	r       io.Reader
	limit   int64
	eof     chan struct{}
	once    sync.Once
	lineLen int64 // bytes since the last newline
	tooLong atomic.Bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		l.lineLen = int64(n - i - 1)
	} else {
		l.lineLen += int64(n)
	}
	if err == nil && l.lineLen > l.limit {
		l.tooLong.Store(true)
		err = tooLargeError(l.limit)
	}
	if err != nil {
		l.once.Do(func() { close(l.eof) })
	}
	return n, err
}

// tooLargeKey marks a request's context with the flag its response body
// sets when it goes over the limit: mcp-go does not always pass the body's
// error on (an event stream that breaks off is "unexpected nil response").
type tooLargeKey struct{}

func withTooLargeFlag(ctx context.Context) (context.Context, *atomic.Bool) {
	flag := new(atomic.Bool)
	return context.WithValue(ctx, tooLargeKey{}, flag), flag
}

// limitedClient returns an HTTP client for a remote child whose response
// bodies fail past limit: a JSON body as a whole, an event stream per event
// (a stream stays open for as long as the child likes).
func limitedClient(limit int64, log zerolog.Logger) *http.Client {
	return &http.Client{Transport: &limitedTransport{next: http.DefaultTransport, limit: limit, log: log}}
}

type limitedTransport struct {
	next  http.RoundTripper
	limit int64
	log   zerolog.Logger
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	flag, _ := req.Context().Value(tooLargeKey{}).(*atomic.Bool)
	resp.Body = &limitedBody{
		rc: resp.Body, limit: t.limit, events: mediaType == "text/event-stream",
		flag: flag, log: t.log, method: req.Method, lineEmpty: true,
	}
	return resp, nil
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
