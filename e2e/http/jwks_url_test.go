package http

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Log messages of keys fetched from the identity provider.
const (
	jwksFetchedMsg = "JWKS fetched"
	jwksKeptMsg    = "JWKS fetch failed; the last keys stay in force until valid_until unless a fetch succeeds"
	jwksNoKeysMsg  = "JWKS fetch failed; no JWT is accepted until a fetch succeeds"
)

// nthLine waits for the n'th log line matching match.
func nthLine(t *testing.T, h *ts.HTTPMux, what string, n int, match func(map[string]any) bool) map[string]any {
	t.Helper()
	seen := 0
	return h.Log.WaitLine(t, what, func(l map[string]any) bool {
		if match(l) {
			seen++
		}
		return seen == n
	})
}

// The real binary, its keys from an identity provider found by discovery
// over TLS, trusting the provider's certificate through SSL_CERT_FILE (as
// a private CA would be added in a container). Started while the provider
// is down, mcpmux runs but is not ready and accepts no JWT; once the
// provider is up, a JWT gets in and /readyz says where the keys are
// from. A key rotated in at the provider is accepted at its first use,
// fetched for its unknown kid (jwks_refresh is an hour: no scheduled
// fetch comes first), and the key rotated out refused. The
// protected-resource metadata names the issuer.
func TestHTTPJWKSFromIdentityProvider(t *testing.T) {
	t.Parallel()
	idp := ts.StartIdP(t, ts.JWKS(t, map[string]*rsa.PrivateKey{"k1": ts.RSAKeyA()}))
	idp.Down()
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+
		fmt.Sprintf("\n[upstream.jwt]\nissuer = %q\naudience = %q\ndiscovery = true\njwks_refresh = \"1h\"\njwks_timeout = \"5s\"\n",
			idp.URL(), ts.JWTAudience))
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Env: []string{"SSL_CERT_FILE=" + idp.CertFile(t)}})
	discovery := idp.URL() + ts.IdPDiscoveryPath
	signed := func(key *rsa.PrivateKey, kid string) string {
		return ts.SignJWT(t, key, kid, map[string]any{"iss": idp.URL()})
	}

	// Down at start-up: running, not ready, no JWT accepted.
	h.Log.WaitLine(t, "the failed first fetch", ts.Msg(jwksNoKeysMsg))
	if status, r := jwksReadiness(t, h.Base(0)); status != http.StatusServiceUnavailable || r.Auth == nil || r.Auth.KeysOK ||
		!strings.Contains(r.Auth.Detail, "discovery "+discovery) {
		t.Errorf("/readyz while the provider is down at start: %d %+v; want 503 naming the discovery URL", status, r.Auth)
	}
	if _, err := ts.ConnectHTTPErr(t, h.URL(), ts.HTTPClient{Token: signed(ts.RSAKeyA(), "k1"), Log: h.Log}); !isUnauthorized(err) {
		t.Errorf("connecting before any keys were fetched: %v; want 401", err)
	}
	h.Log.WaitLine(t, "a refusal for want of keys", ts.Msg(refusedMsg, "reason", "no_keys"))

	// Up: the backoff's next attempt finds it.
	idp.Up()
	fetched := h.Log.WaitLine(t, "the keys fetched", ts.Msg(jwksFetchedMsg))
	if fetched["url"] != idp.JWKSURL() || fetched["restored"] != true {
		t.Errorf("logged %v; want the JWKS URL from discovery, restored", fetched)
	}
	// (/readyz answers 503 too while a child is starting.)
	if _, r := jwksReadiness(t, h.Base(0)); r.Auth == nil || !r.Auth.KeysOK ||
		!strings.Contains(r.Auth.Detail, "jwks_uri "+idp.JWKSURL()+" (from discovery)") {
		t.Errorf("/readyz once the keys are fetched: %+v", r.Auth)
	}
	alice := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: signed(ts.RSAKeyA(), "k1"), Log: h.Log})
	if res := alice.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Fatalf("alice's call: %q", ts.Text(res))
	}
	if a := ts.Get(t, h.Base(0)+ts.JWTMetadataPath); !strings.Contains(string(a.Body), `"authorization_servers":["`+idp.URL()+`"]`) {
		t.Errorf("protected-resource metadata %d %s; want the issuer as authorization server", a.Status, a.Body)
	}

	// Rotation: k2 in, k1 out.
	if n := idp.Requests(ts.IdPJWKSPath); n != 1 {
		t.Fatalf("%d JWKS requests before the rotation; want 1", n)
	}
	idp.SetJWKS(ts.JWKS(t, map[string]*rsa.PrivateKey{"k2": ts.RSAKeyB()}))
	alice2 := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: signed(ts.RSAKeyB(), "k2"), Log: h.Log})
	if res := alice2.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Fatalf("a call with the rotated-in key: %q", ts.Text(res))
	}
	if n := idp.Requests(ts.IdPJWKSPath); n != 2 {
		t.Errorf("%d JWKS requests after the rotated-in key's first use; want 2: one for its unknown kid", n)
	}
	if _, err := alice.Call("docs__search", map[string]any{"query": "public"}); !isUnauthorized(err) {
		t.Errorf("a call with the rotated-out key: %v; want 401", err)
	}
	if n := len(h.Log.Lines(ts.Msg(jwksNoKeysMsg))); n != 1 {
		t.Errorf("%q logged %d times; want once, at start", jwksNoKeysMsg, n)
	}
}

// The real binary, its keys from a jwks_url refreshed every 300ms: the
// provider going down keeps the keys in force (one warning, /readyz says
// the fetch fails); back, it is fetched from again.
func TestHTTPJWKSProviderDownAndBack(t *testing.T) {
	t.Parallel()
	idp := ts.StartIdP(t, ts.JWKS(t, map[string]*rsa.PrivateKey{"k1": ts.RSAKeyA()}))
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+
		fmt.Sprintf("\n[upstream.jwt]\nissuer = %q\naudience = %q\njwks_url = %q\njwks_refresh = \"300ms\"\njwks_timeout = \"5s\"\n",
			idp.URL(), ts.JWTAudience, idp.JWKSURL()))
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{Env: []string{"SSL_CERT_FILE=" + idp.CertFile(t)}})
	h.Log.WaitLine(t, "the keys fetched", ts.Msg(jwksFetchedMsg))
	alice := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"iss": idp.URL()}), Log: h.Log})
	if res := alice.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Fatalf("alice's call: %q", ts.Text(res))
	}

	idp.Down()
	h.Log.WaitLine(t, "a failed fetch while keys are in force", ts.Msg(jwksKeptMsg))
	if res := alice.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Errorf("a call while the provider is down: %q", ts.Text(res))
	}
	if _, r := jwksReadiness(t, h.Base(0)); r.Auth == nil || !r.Auth.KeysOK ||
		!strings.Contains(r.Auth.Detail, "the last fetch failed") {
		t.Errorf("/readyz while the provider is down: %+v; want the keys ok, saying the fetch fails", r.Auth)
	}
	idp.Up()
	back := nthLine(t, h, "the keys fetched once the provider is back", 2, ts.Msg(jwksFetchedMsg))
	if back["restored"] != false {
		t.Errorf("logged %v; want restored false: the keys stayed in force", back)
	}
	if _, r := jwksReadiness(t, h.Base(0)); r.Auth == nil || !r.Auth.KeysOK || strings.Contains(r.Auth.Detail, "failed") {
		t.Errorf("/readyz once the provider is back: %+v", r.Auth)
	}
	if res := alice.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Errorf("a call once the provider is back: %q", ts.Text(res))
	}
	if n := len(h.Log.Lines(ts.Msg(jwksKeptMsg))); n != 1 {
		t.Errorf("the outage was logged %d times; want once", n)
	}
	if n := len(h.Log.Lines(ts.Msg(jwksNoKeysMsg))); n != 0 {
		t.Errorf("%q logged %d times; want never", jwksNoKeysMsg, n)
	}
}

func isUnauthorized(err error) bool {
	var authErr *transport.AuthorizationRequiredError
	return errors.As(err, &authErr)
}
