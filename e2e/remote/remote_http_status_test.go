package remote

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// A remote child's HTTP answers other than 200 and 202: a redirect is
// never followed, and an error status fails the one request it answers,
// with a fixed text; neither its body nor where a redirect points to
// reaches the caller, and the session goes on.

// childKey is the header value a remote child's config gives it, which
// must go nowhere but to that child.
const childKey = "child-key-must-stay-at-home"

// frontedRemote starts a remote labserver "docs" over transport behind a
// ts.Front, configured with the X-Child-Key header, and mcpmux with it.
func frontedRemote(t *testing.T, transport string) (*ts.Mux, *ts.Front, *ts.Lab) {
	t.Helper()
	lab := ts.NewLab(t, `call_timeout = "10s"`)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	r := ts.StartRemote(t, lab, "docs", transport)
	front := ts.StartFront(t, r.Addr)
	u, err := url.Parse(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	lab.AddRemote(t, ts.RemoteServer{
		Alias: "docs", URL: front.URL + u.Path, Transport: transport, ReadOnly: ts.RemoteReadOnly,
		Headers: map[string]string{"X-Child-Key": childKey},
	})
	return ts.StartMux(t, lab), front, lab
}

// sameSession checks that docs is still on the session it started with:
// a call works, and the front saw one initialize.
func sameSession(t *testing.T, m *ts.Mux, front *ts.Front) {
	t.Helper()
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs__search after: %q", got)
	}
	if n := front.Count("initialize"); n != 1 {
		t.Errorf("the child was initialized %d times, want once: its session was lost", n)
	}
	if lines := ts.WentAway(m); len(lines) > 0 {
		t.Errorf("the session was lost: %v", lines)
	}
}

// A remote child that answers a call with a redirect to another server:
// mcpmux does not follow it, so that server never sees the call nor the
// child's headers; the call fails with a fixed text, the log names the
// Location's origin (never its path or query), and the session goes on.
func TestRemoteRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			m, front, lab := frontedRemote(t, transport)
			trap := ts.StartTrap(t)
			for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
				front.Answer("append_note", func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Location", trap.URL+"/internal?sig=LOCATION-SECRET")
					w.WriteHeader(code)
				})
				res := m.MustCall("docs__append_note", map[string]any{"text": "redirected"})
				want := fmt.Sprintf("server docs answered the call to docs__append_note with HTTP %d, a redirect, which mcpmux does not follow", code)
				if got := ts.Text(res); !res.IsError || got != want {
					t.Errorf("%d: isError=%v %q, want isError and %q", code, res.IsError, got, want)
				}
				line := m.Log.WaitLine(t, fmt.Sprintf("the redirect %d logged", code), func(l map[string]any) bool {
					return ts.Msg("server answered with a redirect, which mcpmux does not follow", "server", "docs")(l) &&
						l["status"] == float64(code)
				})
				if line["location_origin"] != trap.URL || line["request"] != "tools/call" {
					t.Errorf("%d: logged %v, want location_origin %s and request tools/call", code, line, trap.URL)
				}
			}
			if seen := trap.Requests(); len(seen) > 0 {
				t.Errorf("the redirect target got %d requests, the first %s %s with X-Child-Key %q",
					len(seen), seen[0].HTTPMethod, seen[0].Path, seen[0].Header.Get("X-Child-Key"))
			}
			if log := m.Log.Text(); strings.Contains(log, "LOCATION-SECRET") || strings.Contains(log, childKey) {
				t.Error("the log holds the Location's query or the child's header")
			}
			if notes := lab.NotesOf(t, "docs"); notes != "" {
				t.Errorf("the child wrote notes %q", notes)
			}
			sameSession(t, m, front)
		})
	}
}

// A remote child that answers one call with an HTTP error status: that
// call fails with a fixed text naming the status, never with the body,
// which is in no log either; the child is not restarted, and a call in
// flight meanwhile gets its own answer, once.
func TestRemoteHTTPErrorFailsOnlyTheCall(t *testing.T) {
	t.Parallel()
	const secret = "REMOTE-SECRET-BODY"
	for _, transport := range ts.RemoteTransports {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			m, front, lab := frontedRemote(t, transport)
			slow := callAsync(m, "docs__slow", map[string]any{"ms": 4000, "tag": "in-flight"})
			lab.WaitStarted(t, "in-flight")
			for _, c := range []struct {
				code int
				body string
			}{
				{http.StatusInternalServerError, "database password is " + secret},
				{http.StatusBadGateway, "<html>" + secret + "</html>"},
				{http.StatusServiceUnavailable, ""},
				{http.StatusBadRequest, secret},
				{http.StatusUnauthorized, secret},
				{http.StatusForbidden, secret},
				// A JSON-RPC error for the call's id under an error status
				// is the body all the same.
				{http.StatusInternalServerError, `{"jsonrpc":"2.0","id":"ID","error":{"code":-32603,"message":"` + secret + `"}}`},
			} {
				front.Answer("append_note", func(w http.ResponseWriter, r *http.Request) {
					var id string
					for _, req := range front.Requests() {
						if req.Tool == "append_note" {
							id = string(req.ID) // this request's, the last so far
						}
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(c.code)
					_, _ = w.Write([]byte(strings.ReplaceAll(c.body, `"ID"`, id)))
				})
				res := m.MustCall("docs__append_note", map[string]any{"text": "failed"})
				want := fmt.Sprintf("server docs answered the call to docs__append_note with HTTP %d", c.code)
				if got := ts.Text(res); !res.IsError || got != want {
					t.Errorf("%d %.30q: isError=%v %q, want isError and %q", c.code, c.body, res.IsError, got, want)
				}
				m.Log.WaitLine(t, fmt.Sprintf("the status %d logged", c.code), func(l map[string]any) bool {
					return ts.Msg("server answered a request with an HTTP error status", "server", "docs", "request", "tools/call")(l) &&
						l["status"] == float64(c.code)
				})
			}
			if strings.Contains(m.Log.Text(), secret) {
				t.Error("the log holds the body")
			}
			a := waitAnswer(t, slow, "the slow call in flight")
			if a.isError || !strings.HasPrefix(a.text, "slept 4000") {
				t.Errorf("the slow call in flight: isError=%v %q", a.isError, a.text)
			}
			n := 0
			for _, r := range front.Requests() {
				if r.Tool == "slow" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("the slow call reached the child %d times, want once", n)
			}
			sameSession(t, m, front)
		})
	}
}
