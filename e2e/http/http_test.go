package http

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The streamable HTTP upstream, end to end: the real mcpmux binary listens
// on 127.0.0.1:0 (the address is read from its log), real labserver
// children serve behind it, and real mcp-go clients and plain HTTP requests
// talk to it.

// Two identities with their own bearer tokens, one given by digest and one
// by environment variable, use mcpmux at the same time (one with a
// 2026-07-28 client, one with a 2025-11-25 session): each sees its own
// catalog and may call only its own tools.
func TestHTTPIdentitiesSeeTheirOwnCatalogs(t *testing.T) {
	t.Parallel()
	const (
		aliceToken = "alice-http-token-7c1d0e5b"
		bobToken   = "bob-http-token-93fa22c4"
	)
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+
		ts.TokenEntry("alice", "sha256", ts.SHA256Hex(aliceToken))+
		ts.TokenEntry("bob", "env", "MCPMUX_E2E_BOB_TOKEN"))
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]`)
	lab.WritePolicy(t, "bob", `allow = ["tickets__search", "tickets__echo"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Env: []string{"MCPMUX_E2E_BOB_TOKEN=" + bobToken}})

	type who struct {
		identity, own, others string
		conn                  *ts.Conn
		want                  []string
	}
	alice := &who{identity: "alice", own: "docs", others: "tickets",
		conn: ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: aliceToken, Log: h.Log}),
		want: []string{"docs__search", "docs__append_note", "docs__slow", "docs__echo", "docs__pick", "docs__whoami"}}
	bob := &who{identity: "bob", own: "tickets", others: "docs",
		conn: ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: bobToken, Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log}),
		want: []string{"tickets__search", "tickets__echo"}}

	for _, w := range []*who{alice, bob} {
		got := w.conn.ToolNames()
		if !ts.SameSet(got, w.want) {
			t.Errorf("%s sees %v, want %v", w.identity, got, w.want)
		}
	}

	// Both sessions are open; their calls interleave.
	var wg sync.WaitGroup
	for _, w := range []*who{alice, bob} {
		for i := range 5 {
			wg.Go(func() {
				msg := fmt.Sprintf("%s-%d", w.identity, i)
				res, err := w.conn.Call(w.own+"__echo", map[string]any{"message": msg})
				if err != nil {
					t.Errorf("%s: %v", msg, err)
				} else if got, want := ts.Text(res), w.own+": "+msg; res.IsError || got != want {
					t.Errorf("%s: isError=%v %q, want %q", msg, res.IsError, got, want)
				}
				name := w.others + "__search"
				res, err = w.conn.Call(name, map[string]any{"query": "public"})
				if why := ts.RefusedCall(res, err, name); why != "" {
					t.Errorf("%s: %s", w.identity, why)
				}
				ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
				defer cancel()
				if res, err := w.conn.Client.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
					t.Errorf("%s: tools/list: %v", w.identity, err)
				} else if len(res.Tools) != len(w.want) {
					t.Errorf("%s: %d tools listed, want %d", w.identity, len(res.Tools), len(w.want))
				}
			})
		}
	}
	wg.Wait()

	// The audit log names the identity each call was made as.
	for _, w := range []*who{alice, bob} {
		h.Log.WaitLine(t, w.identity+"'s allowed call", ts.Msg("call", "identity", w.identity, "tool", w.own+"__echo", "decision", "allowed", "outcome", "ok"))
		h.Log.WaitLine(t, w.identity+"'s refused call", ts.Msg("call", "identity", w.identity, "tool", w.others+"__search", "decision", "denied"))
	}
	if n := len(h.Log.Lines(ts.Msg("call", "identity", "alice", "tool", "tickets__search", "decision", "allowed"))); n != 0 {
		t.Errorf("alice's tickets__search allowed %d times", n)
	}
}

const refusedMsg = "HTTP request refused: not authenticated"

// Every way of not being authenticated gets the same 401, with a Bearer
// challenge pointing at the protected-resource metadata, and one log line
// saying why that never holds the credential. A valid JWT gets in as its
// sub; a key rotated in the JWKS file takes over from the old one.
func TestHTTPAuthentication(t *testing.T) {
	t.Parallel()
	const bobToken = "bob-static-token-5d0c7a11"
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	ts.ReplaceFile(t, jwksFile, ts.JWKS(t, map[string]*rsa.PrivateKey{"k1": ts.RSAKeyA()}))
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("bob", "sha256", ts.SHA256Hex(bobToken))+
		fmt.Sprintf("\n[upstream.jwt]\nissuer = %q\naudience = %q\njwks_file = %q\n", ts.JWTIssuer, ts.JWTAudience, jwksFile))
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]`)
	lab.WritePolicy(t, "bob", `allow = ["tickets__*"]`)
	lab.WritePolicy(t, "carol", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})

	now := time.Now()
	cases := []struct {
		name          string
		authorization []string // nil: no header
		reason        string
		presented     bool // a bearer token was presented and rejected
	}{
		{"no credential", nil, "no_credential", false},
		{"unknown token", []string{"Bearer not-a-configured-token-0c9e"}, "unknown_token", true},
		{"basic scheme", []string{"Basic Ym9iOmJvYi1zdGF0aWMtdG9rZW4tNWQwYzdhMTE="}, "no_credential", false},
		{"bearer without token", []string{"Bearer"}, "no_credential", false},
		{"malformed JWT", []string{"Bearer eyJhbGciOi.bm90IGpzb24.c2ln"}, "bad_token", true},
		{"two Authorization headers", []string{"Bearer " + bobToken, "Bearer " + bobToken}, "bad_token", true},
		{"expired JWT", []string{"Bearer " + ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{
			"iat": now.Add(-2 * time.Hour).Unix(), "exp": now.Add(-time.Hour).Unix()})}, "expired", true},
		{"wrong audience", []string{"Bearer " + ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"aud": "https://other.example/mcp"})}, "wrong_audience", true},
		{"wrong issuer", []string{"Bearer " + ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"iss": "https://evil.example"})}, "wrong_issuer", true},
		{"key not in the JWKS", []string{"Bearer " + ts.SignJWT(t, ts.RSAStranger(), "stranger", nil)}, "bad_token", true},
		{"forged with a known kid", []string{"Bearer " + ts.SignJWT(t, ts.RSAStranger(), "k1", nil)}, "bad_token", true},
		{"no sub", []string{"Bearer " + ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"sub": nil})}, "no_identity", true},
		{"sub not an identity", []string{"Bearer " + ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"sub": "../admin"})}, "no_identity", true},
	}
	refusals := 0
	for _, c := range cases {
		a := ts.PostInitialize(t, h.URL(), c.authorization...)
		if a.Status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401; body %q", c.name, a.Status, a.Body)
			continue
		}
		want := `Bearer realm="mcpmux", resource_metadata="` + ts.JWTMetadata + `"`
		if c.presented {
			want += `, error="invalid_token"`
		}
		if got := a.Header.Values("WWW-Authenticate"); len(got) != 1 || got[0] != want {
			t.Errorf("%s: WWW-Authenticate %q, want %q", c.name, got, want)
		}
		if string(a.Body) != "unauthorized\n" {
			t.Errorf("%s: body %q reveals more than a 401", c.name, a.Body)
		}
		if a.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a session was created", c.name)
		}
		refusals++
		n := 0
		line := h.Log.WaitLine(t, fmt.Sprintf("refusal log of %s", c.name), func(l map[string]any) bool {
			if l["message"] != refusedMsg {
				return false
			}
			n++
			return n == refusals
		})
		if line["reason"] != c.reason || line["path"] != "/mcp" || line["method"] != "POST" {
			t.Errorf("%s: logged %v, want reason %s", c.name, line, c.reason)
		}
	}
	// A last refusal, of a GET, marks the end: once it is logged, every
	// line of the requests before it is too, and there is one per refusal.
	if a := ts.Do(t, http.MethodGet, h.URL(), "", nil, ""); a.Status != http.StatusUnauthorized {
		t.Fatalf("GET without credential: %d", a.Status)
	}
	h.Log.WaitLine(t, "the GET's refusal", ts.Msg(refusedMsg, "method", "GET"))
	if got := len(h.Log.Lines(ts.Msg(refusedMsg, "method", "POST"))); got != refusals {
		t.Errorf("%d refusal lines for %d refused requests", got, refusals)
	}
	text := h.Log.Text()
	for _, c := range cases {
		for _, v := range c.authorization {
			if _, tok, ok := strings.Cut(v, " "); ok && len(tok) > 8 && strings.Contains(text, tok) {
				t.Errorf("%s: the credential appears in the log", c.name)
			}
		}
	}

	// The metadata the challenge points to, served without authentication.
	meta := ts.Get(t, h.Base(0)+ts.JWTMetadataPath)
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if meta.Status != http.StatusOK || json.Unmarshal(meta.Body, &prm) != nil {
		t.Fatalf("GET %s: %d %q", ts.JWTMetadataPath, meta.Status, meta.Body)
	}
	if prm.Resource != ts.JWTAudience || !slices.Equal(prm.AuthorizationServers, []string{ts.JWTIssuer}) {
		t.Errorf("protected-resource metadata %s", meta.Body)
	}

	// mcp-go's client sees the 401 and the metadata URL.
	_, err := ts.ConnectHTTPErr(t, h.URL(), ts.HTTPClient{Token: "not-a-configured-token-0c9e"})
	var authErr *transport.AuthorizationRequiredError
	if !errors.As(err, &authErr) || authErr.ResourceMetadataURL != ts.JWTMetadata {
		t.Errorf("client with an unknown token: %v, want 401 with the metadata URL", err)
	}

	// A valid JWT is alice, a static token is bob: each gets its catalog.
	valid := ts.SignJWT(t, ts.RSAKeyA(), "k1", nil)
	for _, c := range []struct{ token, identity, tool, other string }{
		{valid, "alice", "docs__search", "tickets__search"},
		{bobToken, "bob", "tickets__search", "docs__search"},
	} {
		conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: c.token, Log: h.Log})
		names := conn.ToolNames()
		if !ts.Contains(names, c.tool) || ts.Contains(names, c.other) {
			t.Errorf("%s sees %v", c.identity, names)
		}
		if res := conn.MustCall(c.tool, map[string]any{"query": "public"}); res.IsError {
			t.Errorf("%s: %s: %q", c.identity, c.tool, ts.Text(res))
		}
		h.Log.WaitLine(t, c.identity+"'s call", ts.Msg("call", "identity", c.identity, "tool", c.tool, "outcome", "ok"))
	}
	if strings.Contains(h.Log.Text(), valid) {
		t.Error("the valid JWT appears in the log")
	}

	// Key rotation: the JWKS file is replaced by one holding only k2. The
	// watcher reloads it on its own time, so the new key is retried until
	// it works.
	rotated := ts.SignJWT(t, ts.RSAKeyB(), "k2", map[string]any{"sub": "carol"})
	if a := ts.PostInitialize(t, h.URL(), "Bearer "+rotated); a.Status != http.StatusUnauthorized {
		t.Fatalf("k2 accepted before the rotation: %d", a.Status)
	}
	ts.ReplaceFile(t, jwksFile, ts.JWKS(t, map[string]*rsa.PrivateKey{"k2": ts.RSAKeyB()}))
	ts.WaitFor(t, "the rotated key to be accepted", func() bool {
		return ts.PostInitialize(t, h.URL(), "Bearer "+rotated).Status == http.StatusOK
	})
	h.Log.WaitLine(t, "JWKS reload", ts.Msg("JWKS reloaded"))
	if a := ts.PostInitialize(t, h.URL(), "Bearer "+valid); a.Status != http.StatusUnauthorized {
		t.Errorf("old key's token after the rotation: %d", a.Status)
	}
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: rotated, Log: h.Log})
	if names := conn.ToolNames(); !ts.Contains(names, "tickets__search") || !ts.Contains(names, "docs__search") {
		t.Errorf("carol sees %v", names)
	}
}

// A client listening on the GET stream is told when its identity's policy
// changes its catalog; a client of another identity is not.
func TestHTTPListChangedAfterPolicyEdit(t *testing.T) {
	t.Parallel()
	const aliceToken, bobToken = "alice-listen-token-1a2b", "bob-listen-token-3c4d"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+
		ts.TokenEntry("alice", "sha256", ts.SHA256Hex(aliceToken))+
		ts.TokenEntry("bob", "sha256", ts.SHA256Hex(bobToken)),
		ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "alice", ts.AllowOnly("docs__search"))
	lab.WritePolicy(t, "bob", `allow = ["docs__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	alice := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: aliceToken, Listen: true, Log: h.Log})
	bob := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: bobToken, Listen: true, Log: h.Log})
	if v := alice.ProtocolVersion(); v != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Fatalf("listening client negotiated %q", v)
	}
	if got := alice.ToolNames(); !slices.Equal(got, []string{"docs__search"}) {
		t.Fatalf("alice sees %v", got)
	}
	bobTools := bob.ToolNames()
	alice.Ping()
	bob.Ping()
	alice.DrainNotifications()
	bob.DrainNotifications()

	lab.WritePolicy(t, "alice", ts.AllowOnly("docs__search", "docs__echo"))
	alice.Notification(mcp.MethodNotificationToolsListChanged)
	if got := alice.ToolNames(); !ts.SameSet(got, []string{"docs__search", "docs__echo"}) {
		t.Errorf("alice sees %v after the edit", got)
	}
	if res := alice.MustCall("docs__echo", map[string]any{"message": "hi"}); ts.Text(res) != "docs: hi" {
		t.Errorf("docs__echo: %q", ts.Text(res))
	}

	// Back again: by the time alice hears of this second change, mcpmux
	// has long finished telling the sessions concerned by the first.
	lab.WritePolicy(t, "alice", ts.AllowOnly("docs__search"))
	alice.Notification(mcp.MethodNotificationToolsListChanged)
	if got := alice.ToolNames(); !slices.Equal(got, []string{"docs__search"}) {
		t.Errorf("alice sees %v after the second edit", got)
	}
	bob.Ping()
	if n := bob.Pending(mcp.MethodNotificationToolsListChanged); len(n) != 0 {
		t.Errorf("bob received %d tools/list_changed for alice's policy", len(n))
	}
	if got := bob.ToolNames(); !slices.Equal(got, bobTools) {
		t.Errorf("bob's tools changed: %v, was %v", got, bobTools)
	}
}

// A client of protocol 2026-07-28 has no GET stream: it listens with
// subscriptions/listen, and is told when its identity's policy changes its
// catalog.
func TestHTTPListChangedOnSubscription(t *testing.T) {
	t.Parallel()
	const aliceToken = "alice-subscribe-token-5e6f"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("alice", "sha256", ts.SHA256Hex(aliceToken)),
		ts.Server{Alias: "docs", Hide: []string{"crash_for_test", "spawn_grandchild"}})
	lab.WritePolicy(t, "alice", ts.AllowOnly("docs__search", "docs__notify_changed", "docs__extra"))
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	alice := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: aliceToken, Log: h.Log})
	if v := alice.ProtocolVersion(); !mcp.IsModernProtocol(v) {
		t.Fatalf("negotiated %q, want the modern protocol", v)
	}
	alice.ToolNames()
	stop, err := alice.Client.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) {
		t.Errorf("subscriptions/listen: %v", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	// The server acknowledges the subscription on its stream: from then on
	// the stream is open.
	alice.Notification(mcp.MethodNotificationSubscriptionsAcknowledged)

	lab.WritePolicy(t, "alice", ts.AllowOnly("docs__search", "docs__notify_changed", "docs__extra", "docs__echo"))
	h.Log.WaitLine(t, "the reload", ts.Msg("policies reloaded", "changed", "[alice]"))
	if alice.Await(mcp.MethodNotificationToolsListChanged, ts.Wait) {
		if got := alice.ToolNames(); !ts.Contains(got, "docs__echo") {
			t.Errorf("alice sees %v after the edit", got)
		}
		return
	}
	t.Errorf("no tools/list_changed on the subscriptions/listen stream after alice's policy changed her catalog")
	// Is the stream itself working? A change of the child's catalog is
	// announced to every listener.
	alice.MustCall("docs__notify_changed", nil)
	if alice.Await(mcp.MethodNotificationToolsListChanged, ts.Wait) {
		t.Errorf("(a change of the child's catalog does reach the same stream: only policy changes are not sent to subscriptions/listen streams)")
	}
}

func serverIn(r ts.Readiness, name string) (state string, required bool, attempt int, ok bool) {
	for _, s := range r.Servers {
		if s.Name == name {
			return s.State, s.Required, s.Attempt, true
		}
	}
	return "", false, 0, false
}

// /healthz answers while mcpmux serves; /readyz is 200 only while every
// required child is ready, and says which is not.
func TestHTTPHealthAndReadiness(t *testing.T) {
	t.Parallel()
	blocker := filepath.Join(t.TempDir(), "fail-init")
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`,
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_FAIL_INIT_FILE": blocker}},
		ts.Server{Alias: "tickets"},
		ts.Server{Alias: "spare", Env: map[string]string{"LAB_FAIL_INIT": "1"}, Extra: "required = false"},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})

	if a := ts.Get(t, h.Base(0)+"/healthz"); a.Status != http.StatusOK || string(a.Body) != "ok" {
		t.Errorf("/healthz: %d %q", a.Status, a.Body)
	}
	r := ts.WaitReadyz(t, h.Base(0), "200", func(code int, _ ts.Readiness) bool { return code == http.StatusOK })
	for _, name := range []string{"docs", "tickets"} {
		if state, required, _, ok := serverIn(r, name); !ok || state != "ready" || !required {
			t.Errorf("/readyz: %s is %q (required %v, listed %v)", name, state, required, ok)
		}
	}
	// The optional child cannot start, and does not hold readiness back.
	if state, required, _, ok := serverIn(r, "spare"); !ok || state == "ready" || required {
		t.Errorf("/readyz: spare is %q (required %v, listed %v)", state, required, ok)
	}

	// Kill docs, and keep it from starting again.
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
	pid, err := strconv.Atoi(ts.Text(conn.MustCall("docs__whoami", nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r = ts.WaitReadyz(t, h.Base(0), "503 with docs restarting", func(code int, r ts.Readiness) bool {
		state, _, attempt, _ := serverIn(r, "docs")
		return code == http.StatusServiceUnavailable && (state == "restarting" || state == "down") && attempt > 0
	})
	if state, _, _, _ := serverIn(r, "tickets"); state != "ready" {
		t.Errorf("tickets is %q while docs restarts", state)
	}
	for _, s := range r.Servers {
		if s.Name == "docs" && (s.Reason == nil || *s.Reason != "exited") {
			t.Errorf("docs restarting with no reason \"exited\": %+v", s)
		}
	}
	if a := ts.Get(t, h.Base(0)+"/healthz"); a.Status != http.StatusOK {
		t.Errorf("/healthz while not ready: %d", a.Status)
	}

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	ts.WaitReadyz(t, h.Base(0), "200 with docs back", func(code int, r ts.Readiness) bool {
		state, _, _, _ := serverIn(r, "docs")
		return code == http.StatusOK && state == "ready"
	})
	if got := ts.Text(conn.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs after its return: %q", got)
	}
}

// /metrics after known traffic counts each call under bounded labels, and
// follows children, sessions and policy reloads.
func TestHTTPMetrics(t *testing.T) {
	t.Parallel()
	const aliceToken = "alice-metrics-token-9f8e"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("alice", "sha256", ts.SHA256Hex(aliceToken)))
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: aliceToken, Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log})

	const okCalls = 3
	for range okCalls {
		if res := conn.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
			t.Fatalf("docs__search: %q", ts.Text(res))
		}
	}
	if res := conn.MustCall("docs__search", map[string]any{"query": "private"}); !res.IsError {
		t.Fatalf("private: %q", ts.Text(res))
	}
	res, err := conn.Call("tickets__search", map[string]any{"query": "public"})
	if why := ts.RefusedCall(res, err, "tickets__search"); why != "" {
		t.Fatal(why)
	}
	const rawName = "nope__exfiltrate_4711"
	res, err = conn.Call(rawName, map[string]any{})
	if why := ts.RefusedCall(res, err, rawName); why != "" {
		t.Fatal(why)
	}

	// Each call is counted before it is answered.
	fams, text := ts.Scrape(t, h.Base(0))
	calls := func(tool, server, decision, outcome string) map[string]string {
		return map[string]string{"identity": "alice", "tool": tool, "server": server, "decision": decision, "outcome": outcome}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mcpmux_calls_total", calls("docs__search", "docs", "allowed", "ok"), okCalls},
		{"mcpmux_calls_total", calls("docs__search", "docs", "allowed", "tool_error"), 1},
		{"mcpmux_calls_total", calls("tickets__search", "tickets", "denied", "refused"), 1},
		{"mcpmux_calls_total", calls("unknown", "none", "unknown", "refused"), 1},
		{"mcpmux_call_duration_seconds", map[string]string{"server": "docs"}, okCalls + 1},
		{"mcpmux_call_overhead_seconds", map[string]string{"server": "docs"}, okCalls + 1},
		{"mcpmux_calls_in_flight", map[string]string{"server": "docs"}, 0},
		{"mcpmux_child_up", map[string]string{"server": "docs"}, 1},
		{"mcpmux_child_up", map[string]string{"server": "tickets"}, 1},
		{"mcpmux_child_state", map[string]string{"server": "docs", "state": "ready"}, 1},
		{"mcpmux_child_state", map[string]string{"server": "docs", "state": "restarting"}, 0},
		{"mcpmux_child_restarts_total", map[string]string{"server": "docs"}, 0},
		{"mcpmux_sessions", map[string]string{"identity": "alice"}, 1},
		// The OpenTelemetry MCP conventions' histograms, tracing on or off.
		{"mcp_server_operation_duration_seconds", map[string]string{"mcp_method_name": "tools/call", "error_type": ""}, okCalls},
		{"mcp_client_operation_duration_seconds",
			map[string]string{"mcp_method_name": "tools/call", "mcpmux_server_alias": "docs", "error_type": ""}, okCalls},
		{"mcp_client_operation_duration_seconds",
			map[string]string{"mcp_method_name": "tools/call", "mcpmux_server_alias": "docs", "error_type": "tool_error"}, 1},
	} {
		if got, ok := ts.Sample(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if got, ok := ts.Sample(fams, "mcpmux_calls_total", calls("tickets__search", "tickets", "allowed", "ok")); ok {
		t.Errorf("tickets__search counted as allowed: %v", got)
	}
	if strings.Contains(text, "nope__") {
		t.Errorf("a raw unknown tool name is a label value:\n%s", text)
	}

	// A policy edit is a reload; a broken policy file, a reload error.
	reloads, _ := ts.Sample(fams, "mcpmux_policy_reloads_total", nil)
	reloadErrors, _ := ts.Sample(fams, "mcpmux_policy_reload_errors_total", nil)
	lab.WritePolicy(t, "alice", `allow = ["docs__*", "tickets__search"]`)
	// A reload can also come between the writes of one save: wait for the
	// one that took the edit in.
	ts.WaitFor(t, "the edit to be reloaded", func() bool {
		fams, _ := ts.Scrape(t, h.Base(0))
		n, _ := ts.Sample(fams, "mcpmux_policy_reloads_total", nil)
		gen, _ := ts.Sample(fams, "mcpmux_policy_generation", nil)
		return n > reloads && gen >= 2
	})
	fams, _ = ts.Scrape(t, h.Base(0))
	if n, _ := ts.Sample(fams, "mcpmux_policy_reload_errors_total", nil); n != reloadErrors {
		t.Errorf("a clean reload counted as an error: %v, was %v", n, reloadErrors)
	}
	if gen, _ := ts.Sample(fams, "mcpmux_policy_generation", nil); gen < 2 {
		t.Errorf("mcpmux_policy_generation = %v after an edit", gen)
	}
	conn.MustCall("tickets__search", map[string]any{"query": "public"})
	fams, _ = ts.Scrape(t, h.Base(0))
	if got, _ := ts.Sample(fams, "mcpmux_calls_total", calls("tickets__search", "tickets", "allowed", "ok")); got != 1 {
		t.Errorf("tickets__search allowed after the edit: counted %v", got)
	}

	lab.WritePolicy(t, "bob", `allow = [`)
	ts.WaitFor(t, "mcpmux_policy_reload_errors_total to grow", func() bool {
		fams, _ := ts.Scrape(t, h.Base(0))
		n, _ := ts.Sample(fams, "mcpmux_policy_reload_errors_total", nil)
		return n > reloadErrors
	})
	if _, r := ts.Readyz(t, h.Base(0)); r.Policy.LastErr == nil || !strings.Contains(*r.Policy.LastErr, "bob") {
		t.Errorf("/readyz policy after a broken file: %+v", r.Policy)
	}
}

// With admin_listen, /healthz, /readyz and /metrics are there and not on
// the MCP port.
func TestHTTPAdminListen(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Listeners: 2})
	mcpBase, adminBase := h.Base(0), h.Base(1)

	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
	conn.MustCall("docs__search", map[string]any{"query": "public"})

	if a := ts.Get(t, adminBase+"/healthz"); a.Status != http.StatusOK {
		t.Errorf("admin /healthz: %d", a.Status)
	}
	ts.WaitReadyz(t, adminBase, "200", func(code int, _ ts.Readiness) bool { return code == http.StatusOK })
	fams, _ := ts.Scrape(t, adminBase)
	if got, _ := ts.Sample(fams, "mcpmux_calls_total", map[string]string{"identity": "reader", "tool": "docs__search", "server": "docs", "decision": "allowed", "outcome": "ok"}); got != 1 {
		t.Errorf("admin /metrics: calls_total = %v, want 1", got)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if a := ts.Get(t, mcpBase+p); a.Status != http.StatusNotFound {
			t.Errorf("MCP port %s: %d, want 404", p, a.Status)
		}
	}
	if a := ts.PostInitialize(t, adminBase+"/mcp"); a.Status != http.StatusNotFound {
		t.Errorf("admin port /mcp: %d, want 404", a.Status)
	}
}

// With debug_listen, Go's profiles are served there and nowhere else.
func TestHTTPDebugListen(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\ndebug_listen = \"127.0.0.1:0\"", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Listeners: 2})
	mcpBase, debugBase := h.Base(0), h.Base(1)
	if a := ts.Get(t, debugBase+"/debug/pprof/heap?debug=1"); a.Status != http.StatusOK || !strings.Contains(string(a.Body), "heap profile") {
		t.Errorf("debug /debug/pprof/heap: %d %.80q", a.Status, a.Body)
	}
	if a := ts.Get(t, debugBase+"/debug/pprof/goroutine?debug=1"); a.Status != http.StatusOK || !strings.Contains(string(a.Body), "goroutine profile") {
		t.Errorf("debug /debug/pprof/goroutine: %d %.80q", a.Status, a.Body)
	}
	if a := ts.Get(t, mcpBase+"/debug/pprof/"); a.Status != http.StatusNotFound {
		t.Errorf("MCP port /debug/pprof/: %d, want 404", a.Status)
	}
	if a := ts.Get(t, debugBase+"/healthz"); a.Status != http.StatusNotFound {
		t.Errorf("debug port /healthz: %d, want 404", a.Status)
	}
}

// slowCalls starts n slow calls of ms milliseconds, tagged prefix-i, and
// waits until each has reached the child.
func slowCalls(t *testing.T, lab *ts.Lab, conn *ts.Conn, prefix string, n, ms int) []chan callResult {
	t.Helper()
	out := make([]chan callResult, n)
	for i := range n {
		out[i] = make(chan callResult, 1)
		tag := fmt.Sprintf("%s-%d", prefix, i)
		go func() {
			res, err := conn.Call("docs__slow", map[string]any{"ms": ms, "tag": tag})
			out[i] <- callResult{tag, res, err}
		}()
	}
	for i := range n {
		lab.WaitStarted(t, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

type callResult struct {
	tag string
	res *mcp.CallToolResult
	err error
}

// SIGTERM stops taking connections and lets calls in flight finish within
// drain_timeout; calls still running at the deadline are answered, not
// dropped.
func TestHTTPDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	t.Run("calls finish within drain_timeout", func(t *testing.T) {
		t.Parallel()
		lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\ndrain_timeout = \"10s\"", ts.Server{Alias: "docs"})
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
		const ms = 2500
		results := slowCalls(t, lab, conn, "drain", 3, ms)

		h.Signal(syscall.SIGTERM)
		ts.WaitFor(t, "new connections to be refused", func() bool { return ts.Refused(h.HostPort(0)) })
		pending := 0
		for _, ch := range results {
			if len(ch) == 0 {
				pending++
			}
		}
		if pending == 0 {
			t.Errorf("mcpmux still took connections when every call had finished")
		}
		for _, ch := range results {
			r := <-ch
			if r.err != nil {
				t.Errorf("%s: %v", r.tag, r.err)
				continue
			}
			if want := fmt.Sprintf("slept %d tag=%s", ms, r.tag); r.res.IsError || ts.Text(r.res) != want {
				t.Errorf("%s: isError=%v %q, want %q", r.tag, r.res.IsError, ts.Text(r.res), want)
			}
		}
		if err := h.WaitExit(); err != nil {
			t.Errorf("exit: %v\nlog:\n%s", err, h.Log.Text())
		}
	})
	t.Run("calls cut off at drain_timeout are answered", func(t *testing.T) {
		t.Parallel()
		lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\ndrain_timeout = \"500ms\"", ts.Server{Alias: "docs"})
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
		results := slowCalls(t, lab, conn, "cut", 3, 30000)
		pids := h.Log.ChildPids()

		h.Signal(syscall.SIGTERM)
		for _, ch := range results {
			var r callResult
			select {
			case r = <-ch:
			case <-time.After(ts.Wait):
				t.Fatalf("a cut-off call got no answer\nlog:\n%s", h.Log.Text())
			}
			if r.err != nil {
				t.Errorf("%s: dropped: %v", r.tag, r.err)
				continue
			}
			if !r.res.IsError || !strings.Contains(ts.Text(r.res), "shutting down") {
				t.Errorf("%s: isError=%v %q, want an error saying mcpmux is shutting down", r.tag, r.res.IsError, ts.Text(r.res))
			}
		}
		if err := h.WaitExit(); err != nil {
			t.Errorf("exit: %v\nlog:\n%s", err, h.Log.Text())
		}
		for _, pid := range pids {
			if ts.Alive(pid) {
				t.Errorf("child %d outlived mcpmux", pid)
			}
		}
		h.Log.WaitLine(t, "the drain deadline", ts.Msg("calls still running at the drain deadline are cut off"))
	})
}

// With --stdio, one process serves its stdio client as [upstream] identity
// and HTTP clients as theirs.
func TestHTTPAndStdioTogether(t *testing.T) {
	t.Parallel()
	const aliceToken = "alice-both-token-77aa"
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+ts.TokenEntry("alice", "sha256", ts.SHA256Hex(aliceToken)))
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	lab.WritePolicy(t, "alice", `allow = ["tickets__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Args: []string{"--stdio"}, Stdio: true})
	web := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: aliceToken, Log: h.Log})

	for _, c := range []struct {
		conn            *ts.Conn
		identity        string
		own, other      string
		ownPrefix, deny string
	}{
		{h.Stdio, "reader", "docs__search", "tickets__search", "docs__", "tickets__"},
		{web, "alice", "tickets__search", "docs__search", "tickets__", "docs__"},
	} {
		names := c.conn.ToolNames()
		if len(names) == 0 {
			t.Errorf("%s sees no tools", c.identity)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, c.ownPrefix) {
				t.Errorf("%s sees %s", c.identity, n)
			}
		}
		if got := ts.Text(c.conn.MustCall(c.own, map[string]any{"query": "public"})); !strings.HasSuffix(got, ": public evidence") {
			t.Errorf("%s: %s = %q", c.identity, c.own, got)
		}
		res, err := c.conn.Call(c.other, map[string]any{"query": "public"})
		if why := ts.RefusedCall(res, err, c.other); why != "" {
			t.Errorf("%s: %s", c.identity, why)
		}
		h.Log.WaitLine(t, c.identity+"'s call", ts.Msg("call", "identity", c.identity, "tool", c.own, "outcome", "ok"))
	}
}

// Listening beyond loopback needs authentication unless it is waived
// explicitly; on loopback, a request naming another host is refused (DNS
// rebinding).
func TestHTTPExposure(t *testing.T) {
	t.Parallel()
	bin, _ := ts.Binaries(t)
	for _, c := range []struct {
		name     string
		upstream string
		args     []string
	}{
		{"every IPv4 interface", `listen = "0.0.0.0:0"`, nil},
		{"every interface", `listen = ":0"`, nil},
		{"--listen", "", []string{"--listen", "0.0.0.0:0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lab := ts.HTTPLab(t, "", c.upstream, ts.Server{Alias: "docs"})
			ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--config", lab.Config}, c.args...)...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 3 {
				t.Fatalf("exit %v, want code 3; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), "authentication") || !strings.Contains(string(out), "allow_unauthenticated") {
				t.Errorf("the refusal does not say what is missing:\n%s", out)
			}
		})
	}

	t.Run("allow_unauthenticated", func(t *testing.T) {
		t.Parallel()
		lab := ts.HTTPLab(t, "", "listen = \"0.0.0.0:0\"\nallow_unauthenticated = true", ts.Server{Alias: "docs"})
		lab.WritePolicy(t, "reader", `allow = ["docs__search"]`)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
		if got := conn.ToolNames(); !slices.Equal(got, []string{"docs__search"}) {
			t.Errorf("tools = %v", got)
		}
		if a := ts.Do(t, http.MethodPost, h.URL(), "evil.example.com", jsonHeaders(), ts.InitializeBody); a.Status != http.StatusForbidden {
			t.Errorf("Host evil.example.com over loopback: %d, want 403", a.Status)
		}
	})

	t.Run("DNS rebinding on loopback", func(t *testing.T) {
		t.Parallel()
		lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		for _, c := range []struct {
			host string
			want int
		}{
			{"evil.example.com", http.StatusForbidden},
			{"evil.example.com:" + portOf(h.HostPort(0)), http.StatusForbidden},
			{"localhost:" + portOf(h.HostPort(0)), http.StatusOK},
			{h.HostPort(0), http.StatusOK},
		} {
			if a := ts.Do(t, http.MethodPost, h.URL(), c.host, jsonHeaders(), ts.InitializeBody); a.Status != c.want {
				t.Errorf("Host %s: %d, want %d (%q)", c.host, a.Status, c.want, a.Body)
			}
		}
		// A browser page elsewhere is refused by its Origin.
		for _, c := range []struct {
			origin string
			want   int
		}{
			{"https://evil.example.com", http.StatusForbidden},
			{"http://localhost:3000", http.StatusOK},
		} {
			hdr := jsonHeaders()
			hdr.Set("Origin", c.origin)
			if a := ts.Do(t, http.MethodPost, h.URL(), h.HostPort(0), hdr, ts.InitializeBody); a.Status != c.want {
				t.Errorf("Origin %s: %d, want %d (%q)", c.origin, a.Status, c.want, a.Body)
			}
		}
	})
}

func jsonHeaders() http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
}

func portOf(hostport string) string {
	_, port, _ := strings.Cut(hostport, ":")
	return port
}

// Clients of protocol 2025-11-25 (initialize, sessions) and of 2026-07-28
// (no handshake, no session) list and call alike.
func TestHTTPBothProtocolEras(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`)
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	for _, c := range []struct {
		name    string
		version string
		modern  bool
	}{
		{"2025-11-25", mcp.LATEST_LEGACY_PROTOCOL_VERSION, false},
		{"default", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Version: c.version, Log: h.Log})
			v := conn.ProtocolVersion()
			if mcp.IsModernProtocol(v) != c.modern || (!c.modern && v != c.version) {
				t.Fatalf("negotiated %q", v)
			}
			if c.modern && conn.Client.GetSessionId() != "" {
				t.Errorf("modern client has session %q", conn.Client.GetSessionId())
			}
			names := conn.ToolNames()
			if !ts.Contains(names, "docs__search") || ts.Contains(names, "tickets__search") {
				t.Errorf("tools = %v", names)
			}
			res := conn.MustCall("docs__echo", map[string]any{"message": c.name})
			if ts.Text(res) != "docs: "+c.name || res.IsError {
				t.Errorf("docs__echo: isError=%v %q", res.IsError, ts.Text(res))
			}
			res = conn.MustCall("docs__search", map[string]any{"query": "private"})
			if !res.IsError || ts.Text(res) != "service policy denies private data" {
				t.Errorf("private: isError=%v %q", res.IsError, ts.Text(res))
			}
			res, err := conn.Call("tickets__search", map[string]any{"query": "public"})
			if why := ts.RefusedCall(res, err, "tickets__search"); why != "" {
				t.Error(why)
			}
		})
	}
}

// A session idle past session_idle_timeout is dropped: its client's next
// request is told so (404), and a client that initializes again is served.
func TestHTTPIdleSessionIsDropped(t *testing.T) {
	t.Parallel()
	// mcp-go sweeps idle sessions every max(timeout/2, 1s); 2s leaves the
	// session time to be seen before it goes.
	lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\nsession_idle_timeout = \"2s\"", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log})
	conn.MustCall("docs__search", map[string]any{"query": "public"})
	fams, _ := ts.Scrape(t, h.Base(0))
	if n, _ := ts.Sample(fams, "mcpmux_sessions", map[string]string{"identity": "reader"}); n != 1 {
		t.Fatalf("mcpmux_sessions{identity=reader} = %v, want 1", n)
	}
	// Whether the session is gone is only observable by asking.
	ts.WaitFor(t, "the idle session to be dropped", func() bool {
		fams, _ := ts.Scrape(t, h.Base(0))
		n, _ := ts.Sample(fams, "mcpmux_sessions", map[string]string{"identity": "reader"})
		return n == 0
	})
	_, err := conn.Call("docs__search", map[string]any{"query": "public"})
	if !errors.Is(err, transport.ErrSessionTerminated) {
		t.Errorf("call on the dropped session: %v, want 404 (session terminated)", err)
	}
	again := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log})
	if got := ts.Text(again.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("after re-initializing: %q", got)
	}
}
