package auth

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"

	"github.com/mcpmux/mcpmux/config"
	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// remoteUpstream is an upstream whose JWT keys come from jwksURL, with
// durations long enough that only what a test does causes a fetch.
func remoteUpstream(jwksURL string) config.Upstream {
	return config.Upstream{
		Listen: "127.0.0.1:0",
		JWT: &config.JWT{
			Issuer:       testIssuer,
			Audience:     testAudience,
			JWKSURL:      jwksURL,
			JWKSRefresh:  time.Hour,
			JWKSMaxStale: time.Hour,
			JWKSTimeout:  5 * time.Second,
		},
	}
}

// remote is an Authenticator fetching its keys, with Watch running.
type remote struct {
	a   *Authenticator
	log *logBuffer
	// fetches are the outcomes of fetch attempts (nil: keys fetched) and
	// errStale when the keys expired, in order.
	fetches chan error
}

// startRemote builds an Authenticator for up (trusting idp's certificate)
// and runs its Watch until the test ends (see runWatch).
func startRemote(t *testing.T, up config.Upstream, idp *ts.IdP) *remote {
	t.Helper()
	a, log := mustNew(t, up)
	r := a.jwt.remote
	if idp != nil {
		r.client = keyClient(idp.Transport(), r.cfg.JWKSTimeout)
	}
	r.retryMin, r.retryMax = 5*time.Millisecond, 20*time.Millisecond
	rm := &remote{a: a, log: log, fetches: make(chan error, 1024)}
	ctx := t.Context()
	r.testHookFetch = func(err error) {
		select {
		case rm.fetches <- err:
		case <-ctx.Done():
		}
	}
	runWatch(t, a, func() {
		r.client.CloseIdleConnections()
		if idp != nil {
			idp.Down() // an IdP started again serves from a goroutine of its own
		}
	})
	return rm
}

// refreshing starts an IdP serving defaultKeys and an Authenticator
// fetching from it every 10ms, its JWT configuration edited by edit (if
// not nil), and waits for the first fetch.
func refreshing(t *testing.T, edit func(j *config.JWT, idp *ts.IdP)) (*ts.IdP, *remote) {
	t.Helper()
	idp := ts.StartIdP(t, jwksJSON(t, defaultKeys()...))
	up := remoteUpstream(idp.JWKSURL())
	up.JWT.JWKSRefresh = 10 * time.Millisecond
	if edit != nil {
		edit(up.JWT, idp)
	}
	rm := startRemote(t, up, idp)
	rm.next(t, "the first fetch", fetchOK)
	return idp, rm
}

// next waits for the next fetch outcome that ok accepts.
func (rm *remote) next(t *testing.T, what string, ok func(error) bool) error {
	t.Helper()
	return await(t, rm.fetches, "a fetch: "+what, ok)
}

func fetchOK(err error) bool     { return err == nil }
func fetchFailed(err error) bool { return err != nil && !errors.Is(err, errStale) }
func expired(err error) bool     { return errors.Is(err, errStale) }

// linesMsg returns the lines of logs whose message starts with msg.
func linesMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if m, _ := l["message"].(string); strings.HasPrefix(m, msg) {
			out = append(out, l)
		}
	}
	return out
}

const (
	fetchedMsg     = "JWKS fetched"
	keptMsg        = "JWKS fetch failed; the last keys stay in force"
	noKeysFetchMsg = "JWKS fetch failed; no JWT is accepted"
	expiredMsg     = "JWKS keys expired"
)

func wantAccepted(t *testing.T, a *Authenticator, tok, what string) {
	t.Helper()
	if id, err := authWith(t, a, tok); err != nil || id != "alice" {
		t.Fatalf("%s: Authenticate = %q, %v; want alice", what, id, err)
	}
}

func wantRefused(t *testing.T, a *Authenticator, tok, what string, want error) {
	t.Helper()
	if id, err := authWith(t, a, tok); !errors.Is(err, want) {
		t.Fatalf("%s: Authenticate = %q, %v; want %v", what, id, err, want)
	}
}

// rotating starts an IdP serving rsa1 and an Authenticator fetching
// from it (no fetch is scheduled within a test), waits for the first
// fetch, and leaves tokens naming unknown kids one fetch an hour. rotate
// has the IdP serve rsa2 as well.
func rotating(t *testing.T) (idp *ts.IdP, rm *remote, rotate func()) {
	t.Helper()
	rsa1 := jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey}
	idp = ts.StartIdP(t, jwksJSON(t, rsa1))
	rm = startRemote(t, remoteUpstream(idp.JWKSURL()), idp)
	rm.next(t, "the first fetch", fetchOK)
	rm.a.jwt.remote.limiter = rate.NewLimiter(rate.Every(time.Hour), 1)
	return idp, rm, func() { idp.SetJWKS(jwksJSON(t, rsa1, jwkEntry{kid: "rsa2", pub: &rsaKey2().PublicKey})) }
}

// A key rotated in at the provider is fetched when a token first names
// it: that token waits for one fetch and is accepted. A flood of tokens
// naming kids the provider does not have costs it one request.
func TestRemoteKeysRotation(t *testing.T) {
	idp, rm, rotate := rotating(t)
	old := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))
	wantAccepted(t, rm.a, old, "a token of the first key")

	rotate()
	wantAccepted(t, rm.a, sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(nil)), "a token of the rotated-in key")
	wantAccepted(t, rm.a, old, "a token of the first key after the rotation")
	if n := idp.Requests(ts.IdPJWKSPath); n != 2 {
		t.Errorf("%d JWKS requests; want 2: at start and for the new kid", n)
	}
	_, lines := rm.log.take(t)
	if got := linesMsg(lines, fetchedMsg); len(got) != 2 || got[1]["keys"] != float64(2) || got[1]["url"] != idp.JWKSURL() {
		t.Errorf("logged %v; want a %q line for each set of keys, the second with 2 keys naming the URL", got, fetchedMsg)
	}

	// The limit allows one fetch now, and none for an hour after it.
	rm.a.jwt.remote.limiter = rate.NewLimiter(rate.Every(time.Hour), 1)
	var wg sync.WaitGroup
	for i := range 50 {
		tok := sign(t, jwt.SigningMethodRS256, rsaOther(), fmt.Sprintf("made-up-%d", i), claims(nil))
		wg.Go(func() {
			if _, err := authWith(t, rm.a, tok); !errors.Is(err, ErrBadToken) {
				t.Errorf("a token with a made-up kid: %v; want ErrBadToken", err)
			}
		})
	}
	wg.Wait()
	if n := idp.Requests(ts.IdPJWKSPath); n != 3 {
		t.Errorf("%d JWKS requests after 50 tokens with unknown kids; want 3 (one for the flood)", n)
	}
	wantAccepted(t, rm.a, old, "a good token after the flood")
}

// A token whose new kid came with the fetch another token asked for is
// accepted, though that round closed before this token could wait for it
// and the rate limit has no fetch left: the keys changed, so it is
// checked again.
func TestRemoteKeysKidBroughtByAnotherTokensFetch(t *testing.T) {
	idp, rm, rotate := rotating(t)
	r := rm.a.jwt.remote
	rotate()
	tok := sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(nil))
	unknown := 0
	r.testHookUnknownKID = func() {
		// Between the first token's finding its kid unknown and its
		// asking for a fetch, a second token asks for one, spending the
		// limit, and it completes.
		if unknown++; unknown == 1 {
			wantAccepted(t, rm.a, tok, "the token whose fetch brought the kid")
		}
	}
	wantAccepted(t, rm.a, tok, "a token that found the round closed and the limit spent")
	if unknown != 2 {
		t.Errorf("the unknown kid was seen %d times; want 2, once by each token", unknown)
	}
	if n := idp.Requests(ts.IdPJWKSPath); n != 2 {
		t.Errorf("%d JWKS requests; want 2: at start and for the second token", n)
	}
}

// A kid a fetch was asked for and did not bring is remembered as absent:
// a token naming it again is refused at once, though the rate limit would
// allow a fetch, until a fetch changes the keys in force. A kid rotated in
// at the provider meanwhile is still accepted at its first use, and one
// that was remembered as absent is accepted once a fetch brings it.
func TestRemoteKeysAbsentKidRemembered(t *testing.T) {
	idp, rm, _ := rotating(t)
	r := rm.a.jwt.remote
	r.limiter = rate.NewLimiter(rate.Inf, 0) // every unknown kid may fetch
	rsa1 := jwkEntry{kid: "rsa1", pub: &rsaKey1().PublicKey}
	rsa2 := jwkEntry{kid: "rsa2", pub: &rsaKey2().PublicKey}

	forged := sign(t, jwt.SigningMethodRS256, rsaOther(), "made-up", claims(nil))
	wantRefused(t, rm.a, forged, "a token with a made-up kid", ErrBadToken)
	if n := idp.Requests(ts.IdPJWKSPath); n != 2 {
		t.Fatalf("%d JWKS requests; want 2: at start and for the made-up kid", n)
	}
	for i := range 20 {
		wantRefused(t, rm.a, forged, fmt.Sprintf("the made-up kid again (%d)", i), ErrBadToken)
	}
	if n := idp.Requests(ts.IdPJWKSPath); n != 2 {
		t.Errorf("%d JWKS requests after the made-up kid came 20 times more; want still 2", n)
	}

	// rsa2 is asked for before the provider publishes it, then published:
	// the keys in force have not changed, so it is still remembered.
	early := sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(nil))
	wantRefused(t, rm.a, early, "a token of a key not yet published", ErrBadToken)
	idp.SetJWKS(jwksJSON(t, rsa1, rsa2))
	wantRefused(t, rm.a, early, "that token once the key is published, before a fetch", ErrBadToken)
	if n := idp.Requests(ts.IdPJWKSPath); n != 3 {
		t.Errorf("%d JWKS requests; want 3: the one for rsa2 before it was published", n)
	}

	// A real rotation: a kid no fetch was asked for works at its first
	// use, and the fetch it asked for, which changed the keys, brought
	// rsa2 too.
	ec1 := jwkEntry{kid: "ec1", pub: &ecKey1().PublicKey}
	idp.SetJWKS(jwksJSON(t, rsa1, rsa2, ec1))
	wantAccepted(t, rm.a, sign(t, jwt.SigningMethodES256, ecKey1(), "ec1", claims(nil)), "a token of a key rotated in")
	wantAccepted(t, rm.a, early, "the token of the key remembered as absent, once a fetch brought it")
	if n := idp.Requests(ts.IdPJWKSPath); n != 4 {
		t.Errorf("%d JWKS requests; want 4: one more, for ec1", n)
	}
	// The change forgot the made-up kid too: it may ask again, once.
	wantRefused(t, rm.a, forged, "the made-up kid after the keys changed", ErrBadToken)
	wantRefused(t, rm.a, forged, "the made-up kid once more", ErrBadToken)
	if n := idp.Requests(ts.IdPJWKSPath); n != 5 {
		t.Errorf("%d JWKS requests; want 5: one more, for the made-up kid", n)
	}
}

// A kid remembered as absent is accepted once a scheduled refresh brings
// it, with no fetch left to ask for: within jwks_refresh of its
// publication. Refreshes that bring the same keys keep it remembered.
func TestRemoteKeysAbsentKidBroughtByRefresh(t *testing.T) {
	idp, rm := refreshing(t, nil)
	r := rm.a.jwt.remote
	r.limiter = rate.NewLimiter(rate.Inf, 0)
	tok := sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(nil))
	wantRefused(t, rm.a, tok, "a token of a key not yet published", ErrBadToken)
	if !rm.a.jwt.keys.Load().absent.has("rsa2") {
		t.Fatal("the kid the fetch did not bring is not remembered")
	}
	r.limiter = rate.NewLimiter(0, 0) // no fetch for an unknown kid from now on
	rm.settled(t, "a refresh with the same keys")
	if !rm.a.jwt.keys.Load().absent.has("rsa2") {
		t.Error("a refresh that brought the same keys forgot the absent kid")
	}
	wantRefused(t, rm.a, tok, "the token again", ErrBadToken)
	idp.SetJWKS(jwksJSON(t, append(defaultKeys(), jwkEntry{kid: "rsa2", pub: &rsaKey2().PublicKey})...))
	rm.settled(t, "a refresh that brings rsa2")
	wantAccepted(t, rm.a, tok, "the token once a refresh brought its key")
}

// settled waits for a fetch that began after it was called: the outcomes
// already reported are dropped, and the fetch that may be running is let
// finish.
func (rm *remote) settled(t *testing.T, what string) {
	t.Helper()
	for len(rm.fetches) > 0 {
		<-rm.fetches
	}
	rm.next(t, what+" (one that may have begun before)", fetchOK)
	rm.next(t, what, fetchOK)
}

// The kids remembered as absent are bounded: the oldest are forgotten
// first.
func TestAbsentKIDsBounded(t *testing.T) {
	var a absentKIDs
	for i := range maxAbsentKIDs + 10 {
		a.add(fmt.Sprintf("kid-%d", i))
	}
	if n := a.len(); n != maxAbsentKIDs {
		t.Errorf("%d kids remembered; want %d", n, maxAbsentKIDs)
	}
	for i := range 10 {
		if a.has(fmt.Sprintf("kid-%d", i)) {
			t.Errorf("kid-%d, among the oldest, is still remembered", i)
		}
	}
	for _, i := range []int{10, maxAbsentKIDs + 9} {
		if !a.has(fmt.Sprintf("kid-%d", i)) {
			t.Errorf("kid-%d is forgotten", i)
		}
	}
	a.add("kid-10") // again: no second entry
	if n := a.len(); n != maxAbsentKIDs {
		t.Errorf("%d kids after adding one already there; want %d", n, maxAbsentKIDs)
	}
}

// Tokens naming unknown kids that cannot be the issuer's (another iss,
// none, an alg mcpmux does not accept) ask the provider for nothing: they
// cannot spend the fetch a real new kid needs.
func TestRemoteKeysOnlyTheIssuersTokensFetch(t *testing.T) {
	idp, rm, rotate := rotating(t)
	r := rm.a.jwt.remote
	unknown := 0
	r.testHookUnknownKID = func() { unknown++ }
	foreign := []struct{ name, tok string }{
		{"another issuer", sign(t, jwt.SigningMethodRS256, rsaOther(), "made-up", claims(map[string]any{"iss": "https://evil.example"}))},
		{"no issuer", sign(t, jwt.SigningMethodRS256, rsaOther(), "made-up", claims(map[string]any{"iss": nil}))},
		{"HS256", sign(t, jwt.SigningMethodHS256, []byte("secret"), "made-up", claims(nil))},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "made-up", claims(nil))},
	}
	for _, f := range foreign {
		wantRefused(t, rm.a, f.tok, f.name, ErrBadToken)
	}
	// HS256 and none are refused before a key is looked for.
	if unknown != 2 {
		t.Errorf("%d tokens reached the unknown kid; want 2 (another issuer, no issuer)", unknown)
	}
	if n := idp.Requests(ts.IdPJWKSPath); n != 1 {
		t.Errorf("%d JWKS requests after the foreign tokens; want 1, at start", n)
	}

	rotate()
	wantAccepted(t, rm.a, sign(t, jwt.SigningMethodRS256, rsaKey2(), "rsa2", claims(nil)), "a token of the rotated-in key")
	if n := idp.Requests(ts.IdPJWKSPath); n != 2 {
		t.Errorf("%d JWKS requests; want 2: at start and for the new kid", n)
	}
}

// While the provider is unreachable the last keys stay in force (one
// warning, /readyz says the fetch fails); once it is back they are
// fetched again.
func TestRemoteKeysProviderDownAndBack(t *testing.T) {
	idp, rm := refreshing(t, nil)
	tok := sign(t, jwt.SigningMethodES256, ecKey1(), "ec1", claims(nil))
	wantAccepted(t, rm.a, tok, "a token while the provider is up")

	idp.Down()
	for range 3 {
		rm.next(t, "a failed fetch", fetchFailed)
	}
	wantAccepted(t, rm.a, tok, "a token while the provider is down")
	if ok, detail := rm.a.KeysStatus(); !ok || !strings.Contains(detail, "the last fetch failed") || !strings.Contains(detail, idp.JWKSURL()) {
		t.Errorf("KeysStatus while the provider is down = %v, %q; want ok, saying the fetch from the URL fails", ok, detail)
	}
	idp.Up()
	rm.next(t, "a fetch once the provider is back", fetchOK)
	if ok, detail := rm.a.KeysStatus(); !ok || strings.Contains(detail, "failed") {
		t.Errorf("KeysStatus once the provider is back = %v, %q", ok, detail)
	}
	wantAccepted(t, rm.a, tok, "a token once the provider is back")
	_, lines := rm.log.take(t)
	if n := len(linesMsg(lines, keptMsg)); n != 1 {
		t.Errorf("%d %q lines; want 1 for the outage", n, keptMsg)
	}
	if got := linesMsg(lines, fetchedMsg); len(got) != 2 || got[1]["restored"] != false {
		t.Errorf("%q lines %v; want one at start, one when the provider is back (restored false: the keys stayed)", fetchedMsg, got)
	}
	if n := len(linesMsg(lines, noKeysFetchMsg)) + len(linesMsg(lines, expiredMsg)); n != 0 {
		t.Errorf("%d lines saying no JWT is accepted; want none", n)
	}
}

// Keys older than jwks_max_stale are taken out of force: no JWT is
// accepted (no_keys), /readyz says so, and this is logged once, until a
// fetch succeeds.
func TestRemoteKeysBoundedStaleness(t *testing.T) {
	idp, rm := refreshing(t, func(j *config.JWT, _ *ts.IdP) { j.JWKSMaxStale = 200 * time.Millisecond })
	tok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))

	idp.Down()
	rm.next(t, "the keys expiring", expired)
	wantRefused(t, rm.a, tok, "a token after jwks_max_stale", ErrNoKeys)
	for range 3 {
		rm.next(t, "a failed fetch after the expiry", fetchFailed)
	}
	ok, detail := rm.a.KeysStatus()
	if ok || !strings.Contains(detail, "expired after jwks_max_stale 200ms") || !strings.Contains(detail, idp.JWKSURL()) {
		t.Errorf("KeysStatus after the expiry = %v, %q; want not ok, saying the keys expired, naming the URL", ok, detail)
	}
	_, lines := rm.log.take(t)
	if got := linesMsg(lines, expiredMsg); len(got) != 1 || got[0]["level"] != "error" {
		t.Errorf("%q lines %v; want one error", expiredMsg, got)
	}
	if n := len(linesMsg(lines, noKeysFetchMsg)); n != 0 {
		t.Errorf("%d %q lines after the expiry was logged; want none", n, noKeysFetchMsg)
	}

	idp.Up()
	rm.next(t, "a fetch once the provider is back", fetchOK)
	wantAccepted(t, rm.a, tok, "a token once the provider is back")
	if ok, _ := rm.a.KeysStatus(); !ok {
		t.Error("KeysStatus not ok once the provider is back")
	}
	_, lines = rm.log.take(t)
	if got := linesMsg(lines, fetchedMsg); len(got) != 1 || got[0]["restored"] != true {
		t.Errorf("%q lines %v; want one, restored", fetchedMsg, got)
	}
}

// A provider down at start-up: mcpmux runs, accepts no JWT and is not
// ready (one error line), and fetches the keys once the provider is up.
func TestRemoteKeysProviderDownAtStart(t *testing.T) {
	idp := ts.StartIdP(t, jwksJSON(t, defaultKeys()...))
	idp.Down()
	rm := startRemote(t, remoteUpstream(idp.JWKSURL()), idp)
	tok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))
	for range 3 {
		rm.next(t, "a failed fetch", fetchFailed)
	}
	wantRefused(t, rm.a, tok, "a token before any fetch succeeded", ErrNoKeys)
	if ok, detail := rm.a.KeysStatus(); ok || !strings.Contains(detail, "jwks_url "+idp.JWKSURL()) {
		t.Errorf("KeysStatus = %v, %q; want not ok, naming the URL", ok, detail)
	}
	idp.Up()
	rm.next(t, "a fetch once the provider is up", fetchOK)
	wantAccepted(t, rm.a, tok, "a token once the provider is up")
	_, lines := rm.log.take(t)
	if got := linesMsg(lines, noKeysFetchMsg); len(got) != 1 || got[0]["level"] != "error" {
		t.Errorf("%q lines %v; want one error", noKeysFetchMsg, got)
	}
	if got := linesMsg(lines, fetchedMsg); len(got) != 1 || got[0]["restored"] != true {
		t.Errorf("%q lines %v; want one, restored", fetchedMsg, got)
	}
}

// A redirect for keys may lead to another https origin, and nothing of
// mcpmux's configuration goes with it: credentials in jwks_url, in its
// userinfo or its query, are sent to its own host only (no Referer names
// it), and a key request carries no header of mcpmux's but Accept.
func TestRemoteKeysRedirectElsewhereCarriesNoSecret(t *testing.T) {
	const secret = "url-secret-4f2a"
	home := ts.StartIdP(t, nil)
	elsewhere := ts.StartIdP(t, jwksJSON(t, defaultKeys()...)) // httptest's certificate: one transport trusts both
	var mu sync.Mutex
	var atHome, there []http.Header
	home.Handle(ts.IdPJWKSPath, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atHome = append(atHome, r.Header.Clone())
		mu.Unlock()
		http.Redirect(w, r, elsewhere.JWKSURL(), http.StatusFound)
	})
	elsewhere.Handle(ts.IdPJWKSPath, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		there = append(there, r.Header.Clone())
		mu.Unlock()
		_, _ = w.Write(jwksJSON(t, defaultKeys()...))
	})
	u := strings.Replace(home.JWKSURL(), "https://", "https://mcpmux:"+secret+"@", 1) + "?access_token=" + secret
	rm := startRemote(t, remoteUpstream(u), home)
	rm.next(t, "a fetch through the redirect", fetchOK)
	wantAccepted(t, rm.a, sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil)), "a token of the redirected keys")
	mu.Lock()
	defer mu.Unlock()
	if len(atHome) == 0 || !strings.HasPrefix(atHome[0].Get("Authorization"), "Basic ") {
		t.Fatalf("jwks_url's own host saw %v; want its credentials", atHome)
	}
	if len(there) == 0 {
		t.Fatal("the redirect was not followed")
	}
	for _, h := range there {
		for name, values := range h {
			switch name {
			case "Accept", "Accept-Encoding", "User-Agent":
			default:
				t.Errorf("the other origin got header %s: %q", name, values)
			}
			for _, v := range values {
				if strings.Contains(v, secret) {
					t.Errorf("the other origin got the secret in %s", name)
				}
			}
		}
	}
}

// An answer that is not a JWKS from a trusted place, or not within
// jwks_timeout, is a failed fetch, named by URL, that puts no key in
// force. The limits ride on the client jwkset fetches with, and on the
// discovery request too.
func TestRemoteKeysBadAnswers(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(jwksJSON(t, defaultKeys()...))
	}))
	defer plain.Close()
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	oversized := func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[],"issuer":"` + strings.Repeat("x", MaxJWKSBody) + `"}`))
	}
	tests := []struct {
		name      string
		path      string
		h         http.HandlerFunc
		discovery bool
		timeout   time.Duration
		want      string
	}{
		{"larger than 1 MiB", ts.IdPJWKSPath, oversized, false, 0, "response larger than 1024 KiB"},
		{"not JSON", ts.IdPJWKSPath, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("<html>sign in</html>"))
		}, false, 0, "failed to decode JWK Set response"},
		{"a malformed key", ts.IdPJWKSPath, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"keys":[{"kty":"RSA","kid":"r","n":"!!!","e":"AQAB"}]}`))
		}, false, 0, "failed to create JWK from JWK Marshal"},
		{"status 500", ts.IdPJWKSPath, func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "oops", http.StatusInternalServerError)
		}, false, 0, "invalid HTTP status code: 500"},
		{"no answer in time", ts.IdPJWKSPath, func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, false, 100 * time.Millisecond, "no answer within jwks_timeout 100ms"},
		{"redirect to plain http elsewhere", ts.IdPJWKSPath, redirect("http://keys.example.com/jwks"), false, 0,
			"redirected to http://keys.example.com/jwks, which is plain HTTP to another machine"},
		{"redirect from https to loopback http", ts.IdPJWKSPath, redirect(plain.URL + "/jwks"), false, 0,
			"redirected from https to plain http " + plain.URL + "/jwks"},
		{"discovery naming another issuer", ts.IdPDiscoveryPath, nil, true, 0, `its issuer is "https://evil.example", not the configured`},
		{"discovery with a plain http jwks_uri", ts.IdPDiscoveryPath, nil, true, 0, `jwks_uri "http://keys.example.com/jwks" is plain HTTP`},
		{"discovery larger than 1 MiB", ts.IdPDiscoveryPath, oversized, true, 0, "response larger than 1024 KiB"},
		{"discovery without an answer in time", ts.IdPDiscoveryPath, func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, true, 100 * time.Millisecond, "no answer within jwks_timeout 100ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idp := ts.StartIdP(t, jwksJSON(t, defaultKeys()...))
			up, wantURL := remoteUpstream(idp.JWKSURL()), "jwks_url "+idp.JWKSURL()
			if tc.timeout > 0 {
				up.JWT.JWKSTimeout = tc.timeout
			}
			if tc.discovery {
				up.JWT.JWKSURL, up.JWT.Discovery, up.JWT.Issuer = "", true, idp.URL()
				wantURL = "discovery " + idp.URL() + ts.IdPDiscoveryPath
			}
			switch {
			case tc.h != nil:
				idp.Handle(tc.path, tc.h)
			case tc.discovery:
				doc := map[string]any{"issuer": idp.URL(), "jwks_uri": idp.JWKSURL()}
				if strings.Contains(tc.want, "evil") {
					doc["issuer"] = "https://evil.example"
				} else {
					doc["jwks_uri"] = "http://keys.example.com/jwks"
				}
				idp.SetDiscovery(doc)
			}
			rm := startRemote(t, up, idp)
			err := rm.next(t, "a failed fetch", fetchFailed)
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), wantURL+": ") {
				t.Errorf("fetch error %q; want %q, after %q", err, tc.want, wantURL)
			}
			if ok, detail := rm.a.KeysStatus(); ok || !strings.Contains(detail, tc.want) {
				t.Errorf("KeysStatus = %v, %q", ok, detail)
			}
			iss := up.JWT.Issuer
			wantRefused(t, rm.a, sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(map[string]any{"iss": iss})), "a token", ErrNoKeys)
		})
	}
}

// A fetch that fails after keys were fetched, because jwkset cannot parse
// one of the keys served, keeps the last good keys in force; the log and
// /readyz say why.
func TestRemoteKeysMalformedKeyKeepsLastKeys(t *testing.T) {
	idp, rm := refreshing(t, nil)
	tok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))

	good := jwksJSON(t, defaultKeys()...)
	idp.SetJWKS([]byte(strings.Replace(string(good), `"keys":[`, `"keys":[{"kty":"RSA","kid":"r","n":"!!!","e":"AQAB"},`, 1)))
	err := rm.next(t, "a failed fetch", fetchFailed)
	const want = "failed to create JWK from JWK Marshal"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("fetch error %q; want %q", err, want)
	}
	wantAccepted(t, rm.a, tok, "a token after a JWKS with a malformed key")
	if ok, detail := rm.a.KeysStatus(); !ok || !strings.Contains(detail, "the last fetch failed") || !strings.Contains(detail, want) {
		t.Errorf("KeysStatus = %v, %q; want ok, saying the last fetch failed and why", ok, detail)
	}
	_, lines := rm.log.take(t)
	if got := linesMsg(lines, keptMsg); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["error"]), want) {
		t.Errorf("%q lines %v; want one saying why", keptMsg, got)
	}
}

// A provider that serves a JWKS without a usable key (one jwkset reads but
// mcpmux refuses, none at all, or an answer jwkset reads as an empty set)
// revokes the keys at once, as a file does; the log says why; plain http
// to a loopback address is allowed.
func TestRemoteKeysRevokedByProvider(t *testing.T) {
	tests := []struct {
		name, jwks, want string
	}{
		{"only a symmetric key", `{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`, `key 1 (kid "h"): symmetric keys are not accepted`},
		{"an empty set", `{"keys":[]}`, "jwkset read none"},
		{"JSON but not a JWKS", `{"issuer":"x"}`, "jwkset read none"},
		{"only an unsupported key", `{"keys":[{"kty":"OKP","crv":"Ed448","kid":"ed448","x":"AAAA"}]}`, "jwkset read none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu   sync.Mutex
				jwks = jwksJSON(t, defaultKeys()...)
			)
			plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				_, _ = w.Write(jwks)
			}))
			defer plain.Close()
			up := remoteUpstream(plain.URL + "/jwks")
			up.JWT.JWKSRefresh = 10 * time.Millisecond
			rm := startRemote(t, up, nil)
			rm.next(t, "the first fetch", fetchOK)
			tok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))
			wantAccepted(t, rm.a, tok, "a token over plain http to loopback")

			mu.Lock()
			jwks = []byte(tc.jwks)
			mu.Unlock()
			rm.next(t, "the keys revoked", func(err error) bool { ok, _ := rm.a.KeysStatus(); return err == nil && !ok })
			wantRefused(t, rm.a, tok, "a token after the provider dropped every key", ErrNoKeys)
			if _, detail := rm.a.KeysStatus(); !strings.Contains(detail, tc.want) {
				t.Errorf("KeysStatus %q; want %q", detail, tc.want)
			}
			_, lines := rm.log.take(t)
			if got := linesMsg(lines, "JWKS from the identity provider not usable"); len(got) != 1 || !strings.Contains(fmt.Sprint(got[0]["error"]), tc.want) {
				t.Errorf("logged %v; want one line saying %q", got, tc.want)
			}
		})
	}
}

// A JWKS that carries private keys (jwkset reads their private parts,
// from a file as from a provider) verifies with their public parts alone,
// of every key type, from a file and fetched alike.
func TestKeysWithPrivatePartsVerify(t *testing.T) {
	keys := []jwkEntry{{kid: "rsa1", pub: rsaKey1()}, {kid: "ec1", pub: ecKey1()}, {kid: "ed1", pub: edKey1()}}
	if !strings.Contains(string(jwksJSON(t, keys...)), `"d":`) {
		t.Fatal("the test JWKS carries no private part")
	}
	idp := ts.StartIdP(t, jwksJSON(t, keys...))
	rm := startRemote(t, remoteUpstream(idp.JWKSURL()), idp)
	rm.next(t, "the first fetch", fetchOK)
	file, _ := mustNew(t, testUpstream(t, keys...))
	toks := map[string]string{
		"RS256": sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil)),
		"ES256": sign(t, jwt.SigningMethodES256, ecKey1(), "ec1", claims(nil)),
		"EdDSA": sign(t, jwt.SigningMethodEdDSA, edKey1(), "ed1", claims(nil)),
	}
	for name, a := range map[string]*Authenticator{"fetched": rm.a, "file": file} {
		if ok, detail := a.KeysStatus(); !ok || !strings.HasPrefix(detail, "JWT keys in force: 3") {
			t.Errorf("%s: KeysStatus = %v, %q; want 3 keys, none refused", name, ok, detail)
		}
		for alg, tok := range toks {
			wantAccepted(t, a, tok, name+" "+alg)
		}
	}
}

// With discovery, the JWKS is found through the issuer's
// openid-configuration, read again after a failed fetch; the
// protected-resource metadata names the issuer as authorization server.
func TestRemoteKeysDiscovery(t *testing.T) {
	idp, rm := refreshing(t, func(j *config.JWT, idp *ts.IdP) { j.JWKSURL, j.Discovery, j.Issuer = "", true, idp.URL() })
	tok := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(map[string]any{"iss": idp.URL()}))
	wantAccepted(t, rm.a, tok, "a token of the discovered keys")
	if ok, detail := rm.a.KeysStatus(); !ok || !strings.Contains(detail, "jwks_uri "+idp.JWKSURL()+" (from discovery)") {
		t.Errorf("KeysStatus = %v, %q", ok, detail)
	}
	rm.next(t, "a second fetch", fetchOK)
	if n := idp.Requests(ts.IdPDiscoveryPath); n != 1 {
		t.Errorf("%d discovery requests while the JWKS answers; want 1", n)
	}
	idp.Handle(ts.IdPJWKSPath, http.NotFound)
	rm.next(t, "a failed fetch", fetchFailed)
	rm.next(t, "another attempt", func(error) bool { return true })
	if n := idp.Requests(ts.IdPDiscoveryPath); n < 2 {
		t.Errorf("%d discovery requests after a failed fetch; want it read again", n)
	}

	path, h := rm.a.MetadataHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if want := `"authorization_servers":["` + idp.URL() + `"]`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("metadata %s; want %s", rec.Body.String(), want)
	}
}

// New refuses a key URL that is not https (or http to loopback), and
// needs exactly one source of keys.
func TestNewRemoteErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(j *config.JWT)
		want string
	}{
		{"plain http elsewhere", func(j *config.JWT) { j.JWKSURL = "http://idp.example.com/jwks" }, "is plain HTTP to another machine"},
		{"not a URL", func(j *config.JWT) { j.JWKSURL = "idp/jwks" }, "is not an absolute URL"},
		{"discovery from plain http", func(j *config.JWT) { j.JWKSURL, j.Discovery, j.Issuer = "", true, "http://idp.example.com" }, `issuer "http://idp.example.com" is plain HTTP`},
		{"two sources", func(j *config.JWT) { j.JWKSFile = "/etc/jwks.json" }, "exactly one of"},
		{"no source", func(j *config.JWT) { j.JWKSURL = "" }, "exactly one of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := remoteUpstream("https://idp.example.com/jwks")
			tc.edit(up.JWT)
			_, log := newLogger()
			if _, err := New(up, log); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v; want %q", err, tc.want)
			}
		})
	}
	// Before Watch fetches, no JWT is accepted.
	a, _ := mustNew(t, remoteUpstream("https://idp.example.com/jwks"))
	if ok, detail := a.KeysStatus(); ok || detail != "no JWT accepted: jwks_url https://idp.example.com/jwks: not fetched yet" {
		t.Errorf("KeysStatus before Watch = %v, %q", ok, detail)
	}
}
