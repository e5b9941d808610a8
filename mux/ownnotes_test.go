package mux

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// httpSession returns the one HTTP session m holds, once mcp-go has
// registered it.
func httpSession(t *testing.T, m *Mux) *upstream.Session {
	t.Helper()
	var u *upstream.Session
	testsupport.WaitFor(t, "the HTTP session", func() bool {
		for _, s := range m.sessions.All() {
			if cs := s.MCP(); cs != nil && cs.Initialized() {
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
		u := m.sessions.Lookup(id)
		return u != nil && u.Listening()
	})
}

// sendOwn sends what mcpmux sends outside any call, retrying while the
// session's queue is full.
func sendOwn(t *testing.T, m *Mux, u *upstream.Session, method string, params map[string]any) {
	t.Helper()
	for {
		err := m.sessions.Notify(u, method, params)
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
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })
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
