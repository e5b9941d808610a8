package auth

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/mcpmux/mcpmux/config"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

const wantMetadataURL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

// request is what a test client sends.
type request struct {
	bearer  string              // Authorization: Bearer <bearer>, if not ""
	headers map[string][]string // more headers
}

func (rq request) do(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	if rq.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+rq.bearer)
	}
	for k, vs := range rq.headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// authCase is one request and what should come of it: the identity, or the
// refusal's reason.
type authCase struct {
	name     string
	req      request
	identity string // want 200 with this identity
	reason   string // want 401 with this reason
	// invalidToken: want error="invalid_token" in the challenge (default:
	// whenever a bearer token was sent and refused).
	invalidToken *bool
	detail       string // want the log line's detail to contain this
}

// runCases sends each case to a server behind a's middleware and checks
// the answer, the challenge and the log line.
func runCases(t *testing.T, a *Authenticator, logs *logBuffer, wantMetadata string, cases []authCase) {
	t.Helper()
	srv := httptest.NewServer(a.Middleware(echo, withIdentity))
	defer srv.Close()
	var refusedBody string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := tc.req.do(t, srv.URL+"/mcp")
			raw, lines := logs.take(t)
			if tc.reason == "" {
				if resp.StatusCode != http.StatusOK || body != tc.identity {
					t.Fatalf("got %d %q; want 200 %q (log: %s)", resp.StatusCode, body, tc.identity, raw)
				}
				if len(lines) != 0 {
					t.Errorf("logged on success: %s", raw)
				}
				return
			}
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got %d %q; want 401", resp.StatusCode, body)
			}
			// The body says nothing, and the same for every failure.
			if refusedBody == "" {
				refusedBody = body
			}
			if body != refusedBody || len(body) > 20 {
				t.Errorf("401 body %q; want a short one, the same for every failure (%q)", body, refusedBody)
			}
			challenge := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(challenge, `Bearer realm="mcpmux"`) {
				t.Errorf("WWW-Authenticate %q; want a Bearer challenge with realm mcpmux", challenge)
			}
			if want := `resource_metadata="` + wantMetadata + `"`; wantMetadata != "" && !strings.Contains(challenge, want) {
				t.Errorf("WWW-Authenticate %q; want %s", challenge, want)
			}
			if wantMetadata == "" && strings.Contains(challenge, "resource_metadata") {
				t.Errorf("WWW-Authenticate %q has resource_metadata without JWT", challenge)
			}
			wantInvalid := tc.req.bearer != ""
			if tc.invalidToken != nil {
				wantInvalid = *tc.invalidToken
			}
			if got := strings.Contains(challenge, `error="invalid_token"`); got != wantInvalid {
				t.Errorf("WWW-Authenticate %q: invalid_token %v, want %v", challenge, got, wantInvalid)
			}
			// One Warn line, with the reason and the remote address, and
			// never the credential.
			if len(lines) != 1 {
				t.Fatalf("logged %d lines; want 1:\n%s", len(lines), raw)
			}
			l := lines[0]
			if l["level"] != "warn" || l["reason"] != tc.reason {
				t.Errorf("log line %s; want level warn, reason %s", raw, tc.reason)
			}
			if remote, _ := l["remote"].(string); !strings.HasPrefix(remote, "127.0.0.1:") {
				t.Errorf("log line %s; want the remote address", raw)
			}
			if tc.req.bearer != "" {
				secret := tc.req.bearer
				if i := strings.LastIndexByte(secret, '.'); i >= 0 && i < len(secret)-1 {
					secret = secret[i+1:] // a JWT's signature
				}
				if strings.Contains(raw, tc.req.bearer) || strings.Contains(raw, secret) {
					t.Errorf("log line holds the token: %s", raw)
				}
			}
			if detail, _ := l["detail"].(string); !strings.Contains(detail, tc.detail) {
				t.Errorf("log line %s; want detail containing %q", raw, tc.detail)
			}
			if strings.Contains(body, tc.reason) {
				t.Errorf("401 body %q reveals the reason", body)
			}
		})
	}
}

func bptr(b bool) *bool { return &b }

func TestAuthenticate(t *testing.T) {
	up := testUpstream(t)
	a, logs := mustNew(t, up)

	rsa1, ec1 := rsaKey1(), ecKey1()
	rs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, rsa1, "rsa1", c) }
	now := time.Now()

	pubDER, err := x509.MarshalPKIXPublicKey(&rsa1.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	noneKid := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil))
	noneKid.Header["kid"] = "rsa1"
	noneWithKid, err := noneKid.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}

	runCases(t, a, logs, wantMetadataURL, []authCase{
		{name: "no credential", reason: "no_credential"},
		{name: "basic auth is no credential", req: request{headers: map[string][]string{"Authorization": {"Basic Ym9iOnNlY3JldA=="}}}, reason: "no_credential", detail: "not a Bearer token"},
		{name: "a bare token is no credential", req: request{headers: map[string][]string{"Authorization": {bobToken}}}, reason: "no_credential", detail: "not a Bearer token"},
		{name: "bearer without a token", req: request{headers: map[string][]string{"Authorization": {"Bearer "}}}, reason: "no_credential", detail: "no token"},
		{name: "unknown token", req: request{bearer: "not-a-configured-token"}, reason: "unknown_token"},
		{name: "sha256 token", req: request{bearer: bobToken}, identity: "bob"},
		{name: "env token", req: request{bearer: carolToken}, identity: "carol"},
		{name: "scheme is case-insensitive", req: request{headers: map[string][]string{"Authorization": {"bearer " + bobToken}}}, identity: "bob"},
		{name: "token prefix is unknown", req: request{bearer: bobToken[:len(bobToken)-1]}, reason: "unknown_token"},
		{name: "two Authorization headers", req: request{headers: map[string][]string{"Authorization": {"Bearer " + bobToken, "Bearer " + carolToken}}}, reason: "bad_token", invalidToken: bptr(true)},

		{name: "a trusted header is not configured", req: request{headers: map[string][]string{"X-Remote-User": {"dave"}}}, reason: "no_credential"},

		{name: "jwt RS256", req: request{bearer: rs(claims(nil))}, identity: "alice"},
		{name: "jwt PS384", req: request{bearer: sign(t, jwt.SigningMethodPS384, rsa1, "rsa1", claims(nil))}, identity: "alice"},
		{name: "jwt ES256", req: request{bearer: sign(t, jwt.SigningMethodES256, ec1, "ec1", claims(nil))}, identity: "alice"},
		{name: "jwt audience in a list", req: request{bearer: rs(claims(map[string]any{"aud": []string{"other", testAudience}}))}, identity: "alice"},
		{name: "jwt expired within leeway", req: request{bearer: rs(claims(map[string]any{"exp": now.Add(-10 * time.Second).Unix()}))}, identity: "alice"},
		{name: "jwt expired", req: request{bearer: rs(claims(map[string]any{"exp": now.Add(-time.Hour).Unix(), "iat": now.Add(-2 * time.Hour).Unix()}))}, reason: "expired"},
		{name: "jwt not yet valid", req: request{bearer: rs(claims(map[string]any{"nbf": now.Add(time.Hour).Unix()}))}, reason: "expired"},
		{name: "jwt issued in the future", req: request{bearer: rs(claims(map[string]any{"iat": now.Add(time.Hour).Unix()}))}, reason: "expired"},
		{name: "jwt without exp", req: request{bearer: rs(claims(map[string]any{"exp": nil}))}, reason: "bad_token"},
		{name: "jwt wrong audience", req: request{bearer: rs(claims(map[string]any{"aud": "https://other.example/mcp"}))}, reason: "wrong_audience"},
		{name: "jwt without audience", req: request{bearer: rs(claims(map[string]any{"aud": nil}))}, reason: "wrong_audience"},
		{name: "jwt wrong issuer", req: request{bearer: rs(claims(map[string]any{"iss": "https://evil.example"}))}, reason: "wrong_issuer"},
		{name: "jwt without issuer", req: request{bearer: rs(claims(map[string]any{"iss": nil}))}, reason: "wrong_issuer"},
		{name: "jwt signed by a key not in the JWKS", req: request{bearer: sign(t, jwt.SigningMethodRS256, rsaOther(), "rsa1", claims(nil))}, reason: "bad_token"},
		{name: "jwt with an unknown kid", req: request{bearer: sign(t, jwt.SigningMethodRS256, rsaOther(), "rsa-unknown", claims(nil))}, reason: "bad_token"},
		{name: "jwt without kid, several keys", req: request{bearer: sign(t, jwt.SigningMethodRS256, rsa1, "", claims(nil))}, reason: "bad_token"},
		{name: "jwt alg none", req: request{bearer: none}, reason: "bad_token"},
		{name: "jwt alg none with a kid", req: request{bearer: noneWithKid}, reason: "bad_token"},
		{name: "jwt HS256 with the public key as secret (DER)", req: request{bearer: sign(t, jwt.SigningMethodHS256, pubDER, "rsa1", claims(nil))}, reason: "bad_token"},
		{name: "jwt HS256 with the public key as secret (PEM)", req: request{bearer: sign(t, jwt.SigningMethodHS256, pubPEM, "rsa1", claims(nil))}, reason: "bad_token"},
		{name: "jwt ES256 with an RSA key's kid", req: request{bearer: sign(t, jwt.SigningMethodES256, ec1, "rsa1", claims(nil))}, reason: "bad_token"},
		{name: "jwt with a tampered payload", req: request{bearer: tamper(t, rs(claims(nil)))}, reason: "bad_token"},
		{name: "jwt garbage", req: request{bearer: "eyJhbGciOi.xxx.yyy"}, reason: "bad_token"},
		{name: "jwt without identity claim", req: request{bearer: rs(claims(map[string]any{"sub": nil}))}, reason: "no_identity"},
		{name: "jwt identity not a string", req: request{bearer: rs(claims(map[string]any{"sub": 42}))}, reason: "no_identity"},
		{name: "jwt identity not a valid name", req: request{bearer: rs(claims(map[string]any{"sub": "alice/../root"}))}, reason: "no_identity"},
		{name: "jwt identity empty", req: request{bearer: rs(claims(map[string]any{"sub": ""}))}, reason: "no_identity"},
	})
}

// tamper changes the sub claim of a signed JWT without re-signing it.
func tamper(t *testing.T, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	p, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(p, &c); err != nil {
		t.Fatal(err)
	}
	c["sub"] = "root"
	p, _ = json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(p)
	return strings.Join(parts, ".")
}

func TestCustomIdentityClaim(t *testing.T) {
	up := testUpstream(t)
	up.JWT.IdentityClaim = "mcpmux_identity"
	a, logs := mustNew(t, up)
	rs := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", c) }
	runCases(t, a, logs, wantMetadataURL, []authCase{
		{name: "claim present", req: request{bearer: rs(claims(map[string]any{"mcpmux_identity": "ops"}))}, identity: "ops"},
		{name: "sub is not used", req: request{bearer: rs(claims(nil))}, reason: "no_identity"},
		{name: "claim not a string", req: request{bearer: rs(claims(map[string]any{"mcpmux_identity": []string{"ops"}}))}, reason: "no_identity"},
	})
}

func TestTokensOnly(t *testing.T) {
	up := testUpstream(t)
	up.JWT = nil
	up.TrustedHeader = ""
	a, logs := mustNew(t, up)
	if p, h := a.MetadataHandler(); p != "" || h != nil {
		t.Errorf("MetadataHandler() = %q, %v; want none without JWT", p, h)
	}
	runCases(t, a, logs, "", []authCase{
		{name: "token", req: request{bearer: carolToken}, identity: "carol"},
		{name: "trusted header ignored when not configured", req: request{headers: map[string][]string{"X-Remote-User": {"dave"}}}, reason: "no_credential"},
		{name: "a JWT is an unknown token", req: request{bearer: sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))}, reason: "unknown_token"},
	})
}

// The trusted header alone is the identity source; with tokens and JWT
// too (trusted_header_with_tokens), a request with an Authorization header
// is judged by it alone and one without by the header.
func TestTrustedHeaderModes(t *testing.T) {
	hdr := func(kv ...string) map[string][]string {
		m := map[string][]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = append(m[kv[i]], kv[i+1])
		}
		return m
	}
	jwtAlice := sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(nil))

	headerOnly := config.Upstream{Identity: "stdio-user", TrustedHeader: "x-remote-user"}
	both := testUpstream(t)
	both.TrustedHeader = "X-Remote-User"
	both.TrustedHeaderWithTokens = true

	modes := []struct {
		name     string
		up       config.Upstream
		metadata string
		cases    []authCase
	}{
		{"header only", headerOnly, "", []authCase{
			{name: "header", req: request{headers: hdr("X-Remote-User", "erin")}, identity: "erin"},
			// A proxy may pass the client's own Authorization header on:
			// with no tokens and no JWT configured, it is not looked at.
			{name: "bearer passed on by the proxy", req: request{bearer: "opaque", headers: hdr("X-Remote-User", "erin")}, identity: "erin"},
			{name: "basic passed on by the proxy", req: request{headers: hdr("Authorization", "Basic Ym9iOnNlY3JldA==", "X-Remote-User", "erin")}, identity: "erin"},
			{name: "no header", req: request{bearer: "opaque"}, reason: "no_credential", invalidToken: bptr(false)},
			{name: "header empty", req: request{headers: hdr("X-Remote-User", "")}, reason: "no_credential"},
			{name: "header not an identity", req: request{headers: hdr("X-Remote-User", "../etc/passwd")}, reason: "no_identity"},
			{name: "header given twice", req: request{headers: hdr("X-Remote-User", "erin", "X-Remote-User", "root")}, reason: "no_identity"},
		}},
		{"header with tokens and JWT", both, wantMetadataURL, []authCase{
			{name: "header without Authorization", req: request{headers: hdr("X-Remote-User", "dave")}, identity: "dave"},
			{name: "a token wins over the header", req: request{bearer: bobToken, headers: hdr("X-Remote-User", "dave")}, identity: "bob"},
			{name: "a JWT wins over the header", req: request{bearer: jwtAlice, headers: hdr("X-Remote-User", "dave")}, identity: "alice"},
			{name: "a refused token does not fall back to the header", req: request{bearer: "nope", headers: hdr("X-Remote-User", "dave")}, reason: "unknown_token"},
			{name: "basic does not fall back to the header", req: request{headers: hdr("Authorization", "Basic ZGF2ZTpzZWNyZXQ=", "X-Remote-User", "dave")}, reason: "no_credential", detail: "not a Bearer token"},
			{name: "bearer without a token does not fall back", req: request{headers: hdr("Authorization", "Bearer", "X-Remote-User", "dave")}, reason: "no_credential", detail: "no token"},
			{name: "an empty Authorization does not fall back", req: request{headers: hdr("Authorization", "", "X-Remote-User", "dave")}, reason: "no_credential"},
			{name: "two Authorization headers do not fall back", req: request{headers: hdr("Authorization", "Bearer "+bobToken, "Authorization", "Basic eA==", "X-Remote-User", "dave")}, reason: "bad_token", invalidToken: bptr(true)},
			{name: "neither", reason: "no_credential"},
			{name: "header not an identity", req: request{headers: hdr("X-Remote-User", "a/b")}, reason: "no_identity"},
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			a, logs := mustNew(t, m.up)
			runCases(t, a, logs, m.metadata, m.cases)
		})
	}
}

func TestUnauthenticated(t *testing.T) {
	a, logs := mustNew(t, config.Upstream{Identity: "everyone", Listen: "127.0.0.1:8080", Path: "/mcp"})
	runCases(t, a, logs, "", []authCase{
		{name: "no credential", identity: "everyone"},
		{name: "any bearer", req: request{bearer: "whatever"}, identity: "everyone"},
		{name: "any header", req: request{headers: map[string][]string{"X-Remote-User": {"dave"}}}, identity: "everyone"},
	})
}

func TestSentinelErrors(t *testing.T) {
	a, _ := mustNew(t, testUpstream(t))
	for _, tc := range []struct {
		bearer string
		want   error
	}{
		{"", ErrNoCredential},
		{"nope", ErrUnknownToken},
		{sign(t, jwt.SigningMethodRS256, rsaOther(), "rsa1", claims(nil)), ErrBadToken},
		{sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(map[string]any{"exp": time.Now().Add(-time.Hour).Unix()})), ErrExpired},
		{sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(map[string]any{"aud": "x"})), ErrWrongAudience},
		{sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(map[string]any{"iss": "x"})), ErrWrongIssuer},
		{sign(t, jwt.SigningMethodRS256, rsaKey1(), "rsa1", claims(map[string]any{"sub": nil})), ErrNoIdentity},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if tc.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+tc.bearer)
		}
		id, err := a.Authenticate(r)
		if !errors.Is(err, tc.want) || id != "" {
			t.Errorf("Authenticate = %q, %v; want %v", id, err, tc.want)
		}
	}
}

func TestMetadataHandler(t *testing.T) {
	up := testUpstream(t)
	a, _ := mustNew(t, up)
	path, h := a.MetadataHandler()
	if path != "/.well-known/oauth-protected-resource/mcp" || h == nil {
		t.Fatalf("MetadataHandler() = %q, %v", path, h)
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"resource":                 testAudience,
		"authorization_servers":    []any{testIssuer},
		"bearer_methods_supported": []any{"header"},
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("metadata %s; want %s", gotJSON, wantJSON)
	}

	// Configured authorization servers are advertised instead of the
	// issuer; an audience without a path is served at the bare well-known
	// path.
	up.JWT.AuthorizationServers = []string{"https://as1.example", "https://as2.example"}
	up.JWT.Audience = "https://mcp.example.com"
	a, _ = mustNew(t, up)
	path, h = a.MetadataHandler()
	if path != "/.well-known/oauth-protected-resource" {
		t.Errorf("path %q for an audience without a path", path)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	if !strings.Contains(rec.Body.String(), `"authorization_servers":["https://as1.example","https://as2.example"]`) {
		t.Errorf("metadata %s; want the configured authorization servers", rec.Body)
	}
	rec = httptest.NewRecorder()
	a.Middleware(echo, withIdentity).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="mcpmux", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
}

func TestResourceMetadataFromRequest(t *testing.T) {
	up := testUpstream(t)
	up.JWT.Audience = "mcpmux" // not a URL: the origin is the request's
	a, _ := mustNew(t, up)
	rec := httptest.NewRecorder()
	a.Middleware(echo, withIdentity).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "http://mux.internal:8080/mcp", nil))
	if got := rec.Header().Get("WWW-Authenticate"); got != `Bearer realm="mcpmux", resource_metadata="http://mux.internal:8080/.well-known/oauth-protected-resource"` {
		t.Errorf("WWW-Authenticate %q", got)
	}
}

func TestJWKSKeys(t *testing.T) {
	rsa1, ec1, ed := rsaKey1(), ecKey1(), edKey1()
	edPub := ed.Public()
	tests := []struct {
		name string
		keys []jwkEntry
		tok  string
		want string // identity, or reason
	}{
		{"single key, token without kid", []jwkEntry{{kid: "only", pub: &rsa1.PublicKey}}, sign(t, jwt.SigningMethodRS256, rsa1, "", claims(nil)), "alice"},
		{"single key without kid", []jwkEntry{{pub: &rsa1.PublicKey}}, sign(t, jwt.SigningMethodRS256, rsa1, "", claims(nil)), "alice"},
		{"EdDSA", []jwkEntry{{kid: "ed", pub: edPub}}, sign(t, jwt.SigningMethodEdDSA, ed, "ed", claims(nil)), "alice"},
		{"key alg restricts the token's alg", []jwkEntry{{kid: "r", pub: &rsa1.PublicKey, alg: jwkset.AlgRS256}}, sign(t, jwt.SigningMethodPS256, rsa1, "r", claims(nil)), "bad_token"},
		{"key alg allows it", []jwkEntry{{kid: "r", pub: &rsa1.PublicKey, alg: jwkset.AlgPS256}}, sign(t, jwt.SigningMethodPS256, rsa1, "r", claims(nil)), "alice"},
		{"encryption key ignored", []jwkEntry{{kid: "r", pub: &rsa1.PublicKey, use: jwkset.UseEnc}, {kid: "e", pub: &ec1.PublicKey}}, sign(t, jwt.SigningMethodRS256, rsa1, "r", claims(nil)), "bad_token"},
		{"same kid, two key types", []jwkEntry{{kid: "k", pub: &rsa1.PublicKey}, {kid: "k", pub: &ec1.PublicKey}}, sign(t, jwt.SigningMethodES256, ec1, "k", claims(nil)), "alice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := testUpstream(t, tc.keys...)
			a, _ := mustNew(t, up)
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Authorization", "Bearer "+tc.tok)
			id, err := a.Authenticate(r)
			if got := id + Reason(err); got != tc.want {
				t.Errorf("Authenticate = %q, %v; want %s", id, err, tc.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := testUpstream(t)
	tests := []struct {
		name  string
		edit  func(up *config.Upstream)
		wants string
	}{
		{"missing JWKS", func(up *config.Upstream) { up.JWT.JWKSFile = filepath.Join(dir, "absent.json") }, "no such file"},
		{"JWKS not JSON", func(up *config.Upstream) { up.JWT.JWKSFile = write("bad.json", "{") }, "not a JWKS"},
		{"JWKS without keys", func(up *config.Upstream) { up.JWT.JWKSFile = write("nokeys.json", `{"foo":[]}`) }, `no "keys"`},
		{"JWKS with only a symmetric key", func(up *config.Upstream) {
			up.JWT.JWKSFile = write("oct.json", `{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`)
		}, "no key usable"},
		{"JWKS with a malformed key", func(up *config.Upstream) {
			up.JWT.JWKSFile = write("malformed.json", `{"keys":[{"kty":"RSA","kid":"r","n":"!!!","e":"AQAB"}]}`)
		}, `kid "r"`},
		{"bad sha256", func(up *config.Upstream) { up.Tokens[0].SHA256 = "abc" }, "line 10: sha256"},
		{"empty env token", func(up *config.Upstream) { up.Tokens[1].Value = "" }, "$CAROL_TOKEN is empty"},
		{"duplicate token", func(up *config.Upstream) { up.Tokens[1].Value = bobToken }, "twice"},
		{"invalid identity", func(up *config.Upstream) { up.Tokens[0].Identity = "a/b" }, "invalid identity"},
		{"trusted header with tokens and JWT", func(up *config.Upstream) { up.TrustedHeader = "X-Remote-User" }, "trusted_header_with_tokens"},
		{"trusted header with tokens", func(up *config.Upstream) { up.TrustedHeader = "X-Remote-User"; up.JWT = nil }, "trusted_header_with_tokens"},
		{"trusted header with JWT", func(up *config.Upstream) { up.TrustedHeader = "X-Remote-User"; up.Tokens = nil }, "trusted_header_with_tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := good
			j := *good.JWT
			up.JWT = &j
			up.Tokens = append([]config.Token(nil), good.Tokens...)
			tc.edit(&up)
			_, log := newLogger()
			_, err := New(up, log)
			if err == nil || !strings.Contains(err.Error(), tc.wants) {
				t.Errorf("New = %v; want an error containing %q", err, tc.wants)
			}
		})
	}
}

// At start-up, a file with some unusable keys keeps its good ones and
// logs each refused key with why.
func TestRefusedKeysLogged(t *testing.T) {
	up := testUpstream(t)
	var set struct{ Keys []json.RawMessage }
	if err := json.Unmarshal(jwksJSON(t, defaultKeys()...), &set); err != nil {
		t.Fatal(err)
	}
	set.Keys = append(set.Keys,
		json.RawMessage(`{"kty":"oct","kid":"hmac","k":"c2VjcmV0"}`),
		json.RawMessage(`{"kty":"OKP","crv":"Ed448","kid":"ed448","x":"AAAA"}`),
		json.RawMessage(`{"kty":"RSA","kid":"broken","n":"!!!","e":"AQAB"}`),
		json.RawMessage(`42`))
	data, _ := json.Marshal(map[string]any{"keys": set.Keys})
	testsupport.ReplaceFile(t, up.JWT.JWKSFile, data)
	buf, log := newLogger()
	a, err := New(up, log)
	if err != nil {
		t.Fatal(err)
	}
	raw, lines := buf.take(t)
	want := []string{
		`JWKS: refusing key 3 (kid "hmac"): symmetric keys are not accepted`,
		`JWKS: refusing key 4 (kid "ed448"): unsupported key type or curve`,
		`JWKS: refusing key 5 (kid "broken"): malformed: `,
		`JWKS: refusing key 6: not a JWK: `,
	}
	if len(lines) != len(want) {
		t.Fatalf("log: %s; want %d lines", raw, len(want))
	}
	for i, w := range want {
		if m, _ := lines[i]["message"].(string); !strings.HasPrefix(m, w) || lines[i]["level"] != "warn" {
			t.Errorf("log line %v; want a warning %q", lines[i], w)
		}
	}
	if id, err := authWith(t, a, sign(t, jwt.SigningMethodES256, ecKey1(), "ec1", claims(nil))); id != "alice" {
		t.Errorf("a good key's token = %q, %v", id, err)
	}
	if ok, detail := a.KeysStatus(); !ok || detail != "JWT keys in force: 2, refused: 4" {
		t.Errorf("KeysStatus = %v, %q", ok, detail)
	}
}

func TestLooksLikeJWT(t *testing.T) {
	for s, want := range map[string]bool{
		"a.b.c": true, "a.b.": true, "a..c": false, ".b.c": false, "a.b": false, "a.b.c.d": false, "abc": false,
	} {
		if got := looksLikeJWT(s); got != want {
			t.Errorf("looksLikeJWT(%q) = %v", s, got)
		}
	}
}
