package http

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Outcomes of one call in callTraffic.
const (
	callOK           = "ok"
	callUnauthorized = "401"
)

// callTraffic calls a tool over one connection from its own goroutine until
// stopped, and holds each call to the outcome of the phase of the test it
// was sent and answered in.
type callTraffic struct {
	t    *testing.T
	conn *ts.Conn
	tool string
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	seq     int    // the current phase
	want    string // the outcome every call of the phase must have; "": any
	n       int    // calls sent and answered within the phase
	failed  bool   // a call of the phase was reported
	reached chan struct{}
}

func startCallTraffic(t *testing.T, conn *ts.Conn, tool string) *callTraffic {
	c := &callTraffic{t: t, conn: conn, tool: tool, stop: make(chan struct{}), done: make(chan struct{}),
		want: callOK, reached: make(chan struct{})}
	go c.run()
	t.Cleanup(c.halt)
	return c
}

// halt stops the calls and waits for the last one; it may be called again.
func (c *callTraffic) halt() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *callTraffic) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		c.mu.Lock()
		seq, want := c.seq, c.want
		c.mu.Unlock()
		res, err := c.conn.Call(c.tool, map[string]any{"query": "public"})
		var authErr *transport.AuthorizationRequiredError
		var got string
		switch {
		case err == nil && !res.IsError:
			got = callOK
		case err == nil:
			got = "isError: " + ts.Text(res)
		case errors.As(err, &authErr):
			got = callUnauthorized
		default:
			got = err.Error()
		}
		c.mu.Lock()
		if seq == c.seq {
			if want != "" && got != want && !c.failed {
				c.t.Errorf("call %s in phase %d: %s, want %s", c.tool, seq, got, want)
				c.failed = true
			}
			if c.n++; c.n == 3 {
				close(c.reached)
			}
		}
		c.mu.Unlock()
	}
}

// enter starts a phase in which every call must have outcome want ("": any,
// while a change may or may not have taken effect). For a want other than
// "" it returns once three calls had it.
func (c *callTraffic) enter(want string) {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	c.want, c.n, c.failed = want, 0, false
	reached := make(chan struct{})
	c.reached = reached
	seq := c.seq
	c.mu.Unlock()
	if want == "" {
		return
	}
	select {
	case <-reached:
	case <-time.After(ts.Wait):
		c.t.Fatalf("phase %d: no calls answered", seq)
	}
}

// keysReadiness is the JWT keys' part of /readyz.
type keysReadiness struct {
	Auth *struct {
		KeysOK bool   `json:"jwt_keys_ok"`
		Detail string `json:"detail"`
	} `json:"auth"`
}

func jwksReadiness(t *testing.T, base string) (int, keysReadiness) {
	t.Helper()
	a := ts.Get(t, base+"/readyz")
	var r keysReadiness
	if err := json.Unmarshal(a.Body, &r); err != nil {
		t.Fatalf("/readyz %d: %v: %q", a.Status, err, a.Body)
	}
	return a.Status, r
}

const jwksNotUsableMsg = "JWKS file not usable; no JWT is accepted until it is fixed"

// The JWKS file is deleted while a client calls tools with a valid JWT:
// once mcpmux has reloaded, every call is refused with 401 (logged as
// no_keys) on the same session, /readyz says the keys are not usable, a
// static token still works, and the bad state is logged once as an error.
// A good file back restores the calls.
func TestHTTPJWKSDeletedUnderTraffic(t *testing.T) {
	t.Parallel()
	const bobToken = "bob-static-token-8e21f0a4"
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	good := ts.JWKS(t, map[string]*rsa.PrivateKey{"k1": ts.RSAKeyA()})
	ts.ReplaceFile(t, jwksFile, good)
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("bob", "sha256", ts.SHA256Hex(bobToken))+
		fmt.Sprintf("\n[upstream.jwt]\nissuer = %q\naudience = %q\njwks_file = %q\n", ts.JWTIssuer, ts.JWTAudience, jwksFile))
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]`)
	lab.WritePolicy(t, "bob", `allow = ["tickets__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})

	alice := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.SignJWT(t, ts.RSAKeyA(), "k1", nil), Log: h.Log})
	traffic := startCallTraffic(t, alice, "docs__search")
	traffic.enter(callOK)

	traffic.enter("")
	if err := os.Remove(jwksFile); err != nil {
		t.Fatal(err)
	}
	revoked := h.Log.WaitLine(t, "the JWKS revoked", ts.Msg(jwksNotUsableMsg))
	if revoked["level"] != "error" || revoked["file"] != jwksFile {
		t.Errorf("logged %v; want an error naming the file", revoked)
	}
	traffic.enter(callUnauthorized)
	h.Log.WaitLine(t, "a call refused for want of keys", ts.Msg(refusedMsg, "reason", "no_keys"))
	if status, r := jwksReadiness(t, h.Base(0)); status != http.StatusServiceUnavailable || r.Auth == nil || r.Auth.KeysOK ||
		!strings.Contains(r.Auth.Detail, jwksFile) {
		t.Errorf("/readyz while the keys are revoked: %d %+v; want 503, jwt_keys_ok false naming the file", status, r.Auth)
	}

	// Static tokens are not JWTs: bob still gets in.
	bob := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: bobToken, Log: h.Log})
	if res := bob.MustCall("tickets__search", map[string]any{"query": "public"}); res.IsError {
		t.Errorf("bob's call while the keys are revoked: %q", ts.Text(res))
	}

	traffic.enter("")
	ts.ReplaceFile(t, jwksFile, good)
	h.Log.WaitLine(t, "the JWKS restored", func(l map[string]any) bool {
		return ts.Msg("JWKS reloaded")(l) && l["restored"] == true
	})
	traffic.enter(callOK)
	traffic.halt()
	if _, r := jwksReadiness(t, h.Base(0)); r.Auth == nil || !r.Auth.KeysOK {
		t.Errorf("/readyz after the restore: %+v; want jwt_keys_ok true", r.Auth)
	}

	// Many calls were refused, and the bad state was logged once.
	h.Log.WaitLines(t, "refusals with reason no_keys, one per refused call (at least 3)", 3, ts.Msg(refusedMsg, "reason", "no_keys"))
	if n := len(h.Log.WaitLines(t, "the deleted JWKS", 1, ts.Msg(jwksNotUsableMsg))); n != 1 {
		t.Errorf("the deleted JWKS was logged %d times; want once", n)
	}
}
