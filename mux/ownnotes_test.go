package mux

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// httpSession returns the one HTTP session m holds, once mcp-go has
// registered it.
func httpSession(t *testing.T, m *Mux) *upstreamSession {
	t.Helper()
	var u *upstreamSession
	testsupport.WaitFor(t, "the HTTP session", func() bool {
		for _, s := range m.sessions.all() {
			if cs := s.mcpSession(); cs != nil && cs.Initialized() {
				u = s
			}
		}
		return u != nil
	})
	return u
}

// awaitGETStream waits until c's GET stream is open to mcpmux's own
// notifications: from then on they reach c whatever POSTs c has in flight.
func awaitGETStream(t *testing.T, m *Mux, c *testsupport.Conn) {
	t.Helper()
	id := c.Client.GetSessionId()
	testsupport.WaitFor(t, "the GET stream of "+id, func() bool {
		u := m.sessions.lookup(id)
		return u != nil && u.streamOpen()
	})
}

// sendOwn sends what mcpmux sends outside any call, retrying while the
// session's queue is full.
func sendOwn(t *testing.T, m *Mux, u *upstreamSession, method string, params map[string]any) {
	t.Helper()
	for {
		err := m.notifySession(u, method, params)
		if !errors.Is(err, server.ErrNotificationChannelBlocked) {
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			return
		}
		runtime.Gosched()
	}
}

// Notifications mcpmux sends to an HTTP session outside any call all reach
// the client while POSTs of the same session begin and end all the time:
// mcp-go's forwarder of a POST that ends as it takes one off the session's
// queue drops it, so they must not go through that queue while a GET
// stream is open. Once the POSTs are over, a last notification is sent;
// when it has come down the GET stream, every one sent before it has
// either come or been lost.
func TestOwnNotificationsSurviveEndingPOSTs(t *testing.T) {
	const sent, pingers = 10000, 16
	m := startLab(t, labSpec{allow: []string{"reader"}})
	_, url := serveLab(t, m, HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })
	c := testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Version: mcp.ProtocolVersion20251125, Listen: true})
	notes := testsupport.RecordNotes(c.Client)
	u := httpSession(t, m)
	isURI := func(uri string) func(mcp.JSONRPCNotification) bool {
		return func(n mcp.JSONRPCNotification) bool { return n.Params.AdditionalFields["uri"] == uri }
	}
	update := func(uri string) {
		sendOwn(t, m, u, string(mcp.MethodNotificationResourceUpdated), map[string]any{"uri": uri})
	}
	// With no POST in flight only the GET stream reads the queue: this one
	// arrives once the stream is open.
	update("test://open")
	notes.Await(t, "on the GET stream", 0, isURI("test://open"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range pingers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := c.Client.Ping(context.Background()); err != nil {
					t.Errorf("ping: %v", err)
					return
				}
			}
		})
	}
	for i := range sent {
		update(fmt.Sprintf("test://%d", i))
	}
	close(stop)
	wg.Wait()
	update("test://last")
	notes.Await(t, "the last", 0, isURI("test://last"))
	got := map[any]bool{}
	for _, n := range notes.All() {
		got[n.Params.AdditionalFields["uri"]] = true
	}
	lost := 0
	for i := range sent {
		if !got[fmt.Sprintf("test://%d", i)] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d notifications sent while POSTs ended were lost", lost, sent)
	}
}

// openStreams returns n open streams of a fresh session, in the order
// they opened.
func openStreams(t *testing.T, n int) (*upstreamSession, []*getStream) {
	t.Helper()
	u := &upstreamSession{kind: kindHTTP}
	var out []*getStream
	for range n {
		s := newGetStream(func() {})
		if _, ok := u.addStream(s); !ok {
			t.Fatal("the session has ended")
		}
		s.begin()
		out = append(out, s)
	}
	return u, out
}

// drainStream drains what s holds, by method.
func drainStream(s *getStream) []string {
	var out []string
	for {
		select {
		case n := <-s.queue:
			out = append(out, n.method)
		default:
			return out
		}
	}
}

// TestOwnNotesTakeOneStream: with two GET streams open, mcpmux's
// notifications all go to the newest, in the order sent.
func TestOwnNotesTakeOneStream(t *testing.T) {
	u, s := openStreams(t, 2)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint(i))
		if taken, err := u.offer(ownNote{method: want[i]}); !taken || err != nil {
			t.Fatalf("offer %d: %v, %v", i, taken, err)
		}
	}
	if got := drainStream(s[1]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the newest stream got %q, want %q", got, want)
	}
	if got := drainStream(s[0]); len(got) > 0 {
		t.Errorf("the older stream got %q", got)
	}
}

// TestOwnNoteAfterFailedWrite: a note whose write fails goes to the
// session's other open stream, not to mcp-go; one whose bytes were written
// but not flushed is sent nowhere again.
func TestOwnNoteAfterFailedWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		other int // notes the other stream gets
	}{
		{"write failed", errStreamOver, 1},
		{"flush failed", fmt.Errorf("%w: %w", errUnflushed, errors.New("broken pipe")), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := openStreams(t, 2)
			if taken, err := s[1].offer(ownNote{method: "n"}); !taken || err != nil {
				t.Fatalf("offer: %v, %v", taken, err)
			}
			var given []ownNote
			s[1].run(func([]byte) error { return tc.err }, func(n ownNote) { given = append(given, n) })
			if len(given) > 0 {
				t.Errorf("given to mcp-go: %v", given)
			}
			if got := drainStream(s[0]); len(got) != tc.other {
				t.Errorf("the other stream got %q, want %d", got, tc.other)
			}
		})
	}
}
