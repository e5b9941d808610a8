// Package auth owns who an HTTP caller is: it maps each request on the
// streamable HTTP upstream to an identity, the name of a policy file, from
// the request's headers and never from its body.
//
// A request is authenticated in this order:
//
//  1. With tokens or a JWT issuer configured, a request that carries an
//     Authorization header is judged by that header alone. It must be one
//     header, Authorization: Bearer X; any other scheme, an empty token or
//     several headers is refused. X is first compared with the configured
//     tokens: its SHA-256 digest against every entry's, in constant time
//     and without stopping at a match. If none matches and JWT is
//     configured and X looks like a JWT, X is verified as one: its
//     signature with a key from the JWKS (a file, or fetched from the
//     identity provider; chosen by kid, and only with
//     the algorithms of that key's family: RS*, PS*, ES*, EdDSA; never
//     "none" nor HMAC), exp (required), nbf and iat with 30s of leeway,
//     iss, aud; the identity is then the configured claim. A token that
//     fails any of this is refused: mcpmux never falls back to another
//     method once an Authorization header was presented.
//  2. Otherwise the trusted header, when one is configured and the request
//     has it, set by an authenticating proxy in front of mcpmux. It is the
//     only identity source unless the operator asks for tokens or JWT too
//     (trusted_header_with_tokens); New refuses the combination otherwise.
//     With the trusted header alone, Authorization is not looked at: the
//     proxy may pass the client's own on.
//  3. Otherwise, when nothing at all is configured (no tokens, no JWT, no
//     trusted header), every caller is the upstream's Identity.
//
// Anything else is refused. Identities taken from a JWT claim or from the
// trusted header must be valid identity names: [A-Za-z0-9][A-Za-z0-9._-]*.
//
// The JWKS fails closed. New refuses a JWKS file that is missing, not a
// JWKS or without a usable key. Once running (see Watch), a file that is
// deleted, emptied or made unusable revokes every key: no JWT is accepted
// (401, reason no_keys) until a usable file is back. A key that is
// malformed or cannot verify signatures is refused and logged, and the
// file's other keys are kept. Keys fetched from the identity provider
// (remote.go; jwkset fetches and parses, mcpmux schedules) follow the
// same key rules, except that jwkset fails a fetch on a malformed key and
// leaves out key types it does not support; they fail closed when no
// fetch has succeeded yet or within jwks_max_stale, and when the provider
// serves a JWKS without a usable key. KeysStatus tells /readyz which state
// holds.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
)

// Sentinel errors, for logs and tests. The caller never sees more than a
// 401.
var (
	// ErrNoCredential: the request carries no credential mcpmux accepts.
	ErrNoCredential = errors.New("no credential")
	// ErrUnknownToken: a bearer token that is none of the configured tokens
	// (and not a JWT, or JWT is not configured).
	ErrUnknownToken = errors.New("unknown token")
	// ErrBadToken: a JWT that is malformed, has a bad signature, is signed
	// by a key not in the JWKS or with an algorithm not allowed for that
	// key, or lacks exp.
	ErrBadToken = errors.New("bad token")
	// ErrExpired: a JWT outside its validity window (exp passed, or nbf or
	// iat in the future), beyond the leeway.
	ErrExpired = errors.New("token expired or not yet valid")
	// ErrWrongAudience: a JWT whose aud does not contain the configured
	// audience.
	ErrWrongAudience = errors.New("wrong audience")
	// ErrWrongIssuer: a JWT whose iss is not the configured issuer.
	ErrWrongIssuer = errors.New("wrong issuer")
	// ErrNoIdentity: the identity claim or trusted header is missing, not a
	// string, or not a valid identity name.
	ErrNoIdentity = errors.New("no valid identity")
	// ErrNoKeys: a JWT presented while no usable JWKS is loaded (the file
	// was deleted, emptied or made unusable since start-up).
	ErrNoKeys = errors.New("no JWT keys loaded")
)

// Leeway is the clock skew allowed when checking a JWT's exp, nbf and iat.
const Leeway = 30 * time.Second

// jwtAlgs are the only signature algorithms a JWT may use; which of them a
// token may use further depends on the key that verifies it.
var jwtAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Reason names err's kind for logs and metrics: no_credential,
// unknown_token, bad_token, expired, wrong_audience, wrong_issuer,
// no_identity or no_keys ("" for nil, "error" for anything else).
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNoCredential):
		return "no_credential"
	case errors.Is(err, ErrUnknownToken):
		return "unknown_token"
	case errors.Is(err, ErrBadToken):
		return "bad_token"
	case errors.Is(err, ErrExpired):
		return "expired"
	case errors.Is(err, ErrWrongAudience):
		return "wrong_audience"
	case errors.Is(err, ErrWrongIssuer):
		return "wrong_issuer"
	case errors.Is(err, ErrNoIdentity):
		return "no_identity"
	case errors.Is(err, ErrNoKeys):
		return "no_keys"
	}
	return "error"
}

// Authenticator maps HTTP requests to identities. It is safe for concurrent
// use; Authenticate takes no lock.
type Authenticator struct {
	log zerolog.Logger

	open     bool   // nothing configured: everyone is identity
	identity string // the upstream's Identity, for open mode

	tokens        []token
	trustedHeader string // canonical header name; "" trusts none
	// bearerFirst: tokens or JWT are configured, so a request with an
	// Authorization header is judged by it alone.
	bearerFirst bool

	jwt *jwtAuth // nil unless JWT is configured

	watching atomic.Bool
	// testHookWatching, if set, is called once Watch watches the directory.
	testHookWatching func()
	// testHookReload, if set, is called after each reload attempt of the
	// JWKS file by Watch: changed says whether the keys in force changed
	// (new keys, or every key revoked), err why the file is not usable.
	testHookReload func(changed bool, err error)
}

// token is one configured bearer token.
type token struct {
	digest   [sha256.Size]byte
	identity string
}

// jwtAuth is the JWT side of an Authenticator.
type jwtAuth struct {
	cfg    config.JWT
	parser *jwt.Parser
	keys   atomic.Pointer[keySet]
	remote *remoteKeys // nil for a jwks_file

	// metadataPath and metadataURL are where the protected resource
	// metadata is served: metadataURL is "" when Audience is not an
	// absolute URL, and then derived from each request.
	metadataPath string
	metadataURL  string
	metadata     http.Handler
}

// New builds an Authenticator for up. With JWT configured it loads the JWKS
// file, and fails if the file cannot be read, is not a JWKS or holds no
// usable key; refused keys of a usable file are logged. It refuses a
// trusted header together with tokens or JWT unless
// up.TrustedHeaderWithTokens is set.
func New(up config.Upstream, log zerolog.Logger) (*Authenticator, error) {
	a := &Authenticator{log: log, identity: up.Identity}
	if up.TrustedHeader != "" {
		a.trustedHeader = textproto.CanonicalMIMEHeaderKey(up.TrustedHeader)
	}
	seen := map[[sha256.Size]byte]bool{}
	for i, t := range up.Tokens {
		var e token
		e.identity = t.Identity
		where := fmt.Sprintf("upstream token %d", i+1)
		if t.Line > 0 {
			where = fmt.Sprintf("upstream token at line %d", t.Line)
		}
		if !config.ValidIdentity(t.Identity) {
			return nil, fmt.Errorf("auth: %s: invalid identity %q", where, t.Identity)
		}
		switch {
		case t.Env != "" || t.Value != "":
			if t.Value == "" {
				return nil, fmt.Errorf("auth: %s: $%s is empty", where, t.Env)
			}
			e.digest = sha256.Sum256([]byte(t.Value))
		default:
			d, err := hex.DecodeString(t.SHA256)
			if err != nil || len(d) != sha256.Size {
				return nil, fmt.Errorf("auth: %s: sha256 must be 64 hex digits", where)
			}
			copy(e.digest[:], d)
		}
		if seen[e.digest] {
			return nil, fmt.Errorf("auth: %s: the same token is configured twice", where)
		}
		seen[e.digest] = true
		a.tokens = append(a.tokens, e)
	}
	if up.JWT != nil {
		j, err := newJWTAuth(*up.JWT, log)
		if err != nil {
			return nil, err
		}
		a.jwt = j
	}
	a.bearerFirst = len(a.tokens) > 0 || a.jwt != nil
	if a.bearerFirst && a.trustedHeader != "" && !up.TrustedHeaderWithTokens {
		return nil, errors.New("auth: trusted_header is configured together with tokens or jwt: set trusted_header_with_tokens = true to accept both")
	}
	a.open = !a.bearerFirst && a.trustedHeader == ""
	if a.open && a.identity == "" {
		log.Warn().Msg("HTTP upstream has no authentication and no identity: callers will see no tools")
	}
	return a, nil
}

func newJWTAuth(cfg config.JWT, log zerolog.Logger) (*jwtAuth, error) {
	if cfg.IdentityClaim == "" {
		cfg.IdentityClaim = "sub"
	}
	if len(cfg.AuthorizationServers) == 0 && cfg.Issuer != "" {
		cfg.AuthorizationServers = []string{cfg.Issuer}
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("auth: jwt needs issuer and audience")
	}
	if n := btoi(cfg.JWKSFile != "") + btoi(cfg.JWKSURL != "") + btoi(cfg.Discovery); n != 1 {
		return nil, errors.New("auth: jwt needs exactly one of jwks_file, jwks_url and discovery")
	}
	if cfg.JWKSFile == "" {
		if err := checkRemote(&cfg); err != nil {
			return nil, err
		}
	}
	j := &jwtAuth{
		cfg: cfg,
		parser: jwt.NewParser(
			jwt.WithValidMethods(jwtAlgs),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(Leeway),
		),
	}
	if cfg.JWKSFile != "" {
		ks := loadKeySet(cfg.JWKSFile)
		if ks.err != nil {
			return nil, fmt.Errorf("auth: %w", ks.err)
		}
		ks.logRefused(log, "file", cfg.JWKSFile)
		j.keys.Store(ks)
	} else {
		j.remote = newRemoteKeys(cfg, &j.keys, log)
	}

	j.metadataPath = server.ProtectedResourceMetadataPath(cfg.Audience)
	if origin := originOf(cfg.Audience); origin != "" {
		j.metadataURL = origin + j.metadataPath
	}
	j.metadata = server.NewProtectedResourceMetadataHandler(server.ProtectedResourceMetadataConfig{
		Resource:               cfg.Audience,
		AuthorizationServers:   cfg.AuthorizationServers,
		BearerMethodsSupported: []string{"header"},
	})
	return j, nil
}

// Authenticate returns the identity of the caller that sent r, or an error
// wrapping one of the sentinel errors.
//
// A JWT of the configured issuer naming a kid that none of the keys
// fetched from the identity provider has makes Authenticate wait, at most
// twice jwks_timeout, for one fetch of the keys (see Watch).
func (a *Authenticator) Authenticate(r *http.Request) (identity string, err error) {
	identity, _, _, err = a.authenticate(r)
	return identity, err
}

// Claims are a verified JWT's claims, as decoded from its payload. They
// are never modified once a request is authenticated.
type Claims = map[string]any

// authenticate is Authenticate that also returns the claims of the JWT
// that named the identity (nil for any other credential) and tells whether
// a bearer token was presented (and so, on failure, was the one rejected).
func (a *Authenticator) authenticate(r *http.Request) (identity string, claims Claims, presented bool, err error) {
	if a.open {
		return a.identity, nil, false, nil
	}
	if a.bearerFirst {
		if v := r.Header.Values("Authorization"); len(v) > 0 || a.trustedHeader == "" {
			return a.checkAuthorization(r.Context(), v)
		}
	}
	if a.trustedHeader != "" {
		switch v := r.Header.Values(a.trustedHeader); {
		case len(v) > 1:
			return "", nil, false, fmt.Errorf("%w: header %s given %d times", ErrNoIdentity, a.trustedHeader, len(v))
		case len(v) == 1 && v[0] != "":
			if !config.ValidIdentity(v[0]) {
				return "", nil, false, fmt.Errorf("%w: header %s is not a valid identity", ErrNoIdentity, a.trustedHeader)
			}
			return v[0], nil, false, nil
		}
	}
	return "", nil, false, ErrNoCredential
}

// checkAuthorization judges a request by its Authorization header values
// alone.
func (a *Authenticator) checkAuthorization(ctx context.Context, v []string) (identity string, claims Claims, presented bool, err error) {
	switch {
	case len(v) == 0:
		return "", nil, false, ErrNoCredential
	case len(v) > 1:
		return "", nil, true, fmt.Errorf("%w: several Authorization headers", ErrBadToken)
	}
	// The scheme is not quoted in the error: a client that sends a bare
	// token would have it logged.
	scheme, tok, _ := strings.Cut(strings.TrimSpace(v[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", nil, false, fmt.Errorf("%w: the Authorization header is not a Bearer token", ErrNoCredential)
	}
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", nil, false, fmt.Errorf("%w: the Authorization header has no token", ErrNoCredential)
	}
	identity, claims, err = a.checkBearer(ctx, tok)
	return identity, claims, true, err
}

// checkBearer authenticates a bearer token, returning a JWT's claims.
func (a *Authenticator) checkBearer(ctx context.Context, tok string) (string, Claims, error) {
	d := sha256.Sum256([]byte(tok))
	match := -1
	for i := range a.tokens {
		eq := subtle.ConstantTimeCompare(d[:], a.tokens[i].digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match >= 0 {
		return a.tokens[match].identity, nil, nil
	}
	if a.jwt != nil && looksLikeJWT(tok) {
		return a.jwt.verify(ctx, tok)
	}
	return "", nil, ErrUnknownToken
}

// looksLikeJWT reports whether tok has the shape of a JWS in compact
// serialization: three dot-separated parts, the first two non-empty.
func looksLikeJWT(tok string) bool {
	h, rest, ok := strings.Cut(tok, ".")
	if !ok || h == "" {
		return false
	}
	p, s, ok := strings.Cut(rest, ".")
	return ok && p != "" && !strings.Contains(s, ".")
}

// verify checks tok as a JWT and returns the identity it names and its
// claims. A kid that names none of the keys fetched from the provider
// asks for one fetch (rate limited) when tok's iss, unverified, is the
// configured issuer and no fetch since the keys last changed was asked
// for it in vain, and tok is checked again whenever the keys changed
// meanwhile: the fetch another token asked for may have brought its kid.
func (j *jwtAuth) verify(ctx context.Context, tok string) (string, Claims, error) {
	ks := j.keys.Load()
	claims, kid, err := j.parse(ks, tok)
	if errors.Is(err, errUnknownKID) && j.remote != nil {
		if h := j.remote.testHookUnknownKID; h != nil {
			h()
		}
		// The limit on fetches is shared by every caller: a token that
		// cannot be the issuer's, or names a kid a fetch did not bring,
		// must not spend it and keep a real new kid waiting for
		// jwks_refresh.
		fetched := false
		if iss, _ := claims["iss"].(string); iss == j.cfg.Issuer && !ks.absent.has(kid) {
			fetched = j.remote.refresh(ctx)
		}
		now := j.keys.Load()
		if now != ks {
			claims, kid, err = j.parse(now, tok)
		}
		if fetched && errors.Is(err, errUnknownKID) {
			now.absent.add(kid)
		}
	}
	if err != nil {
		return "", nil, err
	}
	return j.check(claims)
}

// parse checks tok's signature with the keys ks and its validity window.
// When none of ks has tok's kid, the error wraps errUnknownKID, and the
// claims and kid returned are tok's as sent, unverified; its alg is one of
// jwtAlgs (the parser checks it before asking for a key).
func (j *jwtAuth) parse(ks *keySet, tok string) (jwt.MapClaims, string, error) {
	if err := j.usable(ks); err != nil {
		return nil, "", err
	}
	claims := jwt.MapClaims{}
	if t, err := j.parser.ParseWithClaims(tok, claims, ks.keyFunc); err != nil {
		switch {
		case errors.Is(err, errUnknownKID):
			kid, _ := t.Header["kid"].(string) // keyFunc found it a string
			return claims, kid, fmt.Errorf("%w: %w", ErrBadToken, err)
		case errors.Is(err, jwt.ErrTokenExpired) || errors.Is(err, jwt.ErrTokenNotValidYet) || errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
			return nil, "", fmt.Errorf("%w: %w", ErrExpired, err)
		}
		return nil, "", fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	return claims, "", nil
}

// usable returns nil if ks may verify tokens, or an error wrapping
// ErrNoKeys when it holds none, or when fetched keys are older than
// jwks_max_stale (before Watch has noticed).
func (j *jwtAuth) usable(ks *keySet) error {
	if ks.err != nil {
		return fmt.Errorf("%w: %w", ErrNoKeys, ks.err)
	}
	if !ks.expires.IsZero() && !time.Now().Before(ks.expires) {
		return fmt.Errorf("%w: %w", ErrNoKeys, ks.staleErr(j.cfg.JWKSMaxStale, ks.fetchErr))
	}
	return nil
}

// check checks verified claims' issuer and audience and returns the
// identity they name.
func (j *jwtAuth) check(claims jwt.MapClaims) (string, Claims, error) {
	iss, err := claims.GetIssuer()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if iss != j.cfg.Issuer {
		return "", nil, ErrWrongIssuer
	}
	aud, err := claims.GetAudience()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrBadToken, err)
	}
	if !slices.Contains(aud, j.cfg.Audience) {
		return "", nil, ErrWrongAudience
	}
	id, _ := claims[j.cfg.IdentityClaim].(string)
	if id == "" {
		return "", nil, fmt.Errorf("%w: claim %q missing or not a string", ErrNoIdentity, j.cfg.IdentityClaim)
	}
	if !config.ValidIdentity(id) {
		return "", nil, fmt.Errorf("%w: claim %q is not a valid identity", ErrNoIdentity, j.cfg.IdentityClaim)
	}
	return id, Claims(claims), nil
}

// KeysStatus reports, for /readyz, whether JWTs can be verified: ok is
// false while no usable JWKS is loaded (the file was deleted, emptied or
// made unusable since start-up; no fetch from the identity provider has
// succeeded yet, or none within jwks_max_stale; every JWT is then
// refused), and detail says why in one line, naming the file or URL. When
// ok, detail counts the keys in force and those refused, and for fetched
// keys says where from, when, and whether the last fetch failed. Without
// JWT configured, ok is true and detail "". It takes no lock.
func (a *Authenticator) KeysStatus() (ok bool, detail string) {
	if a.jwt == nil {
		return true, ""
	}
	ks := a.jwt.keys.Load()
	if err := a.jwt.usable(ks); err != nil {
		return false, "no JWT accepted: " + strings.TrimPrefix(err.Error(), ErrNoKeys.Error()+": ")
	}
	detail = fmt.Sprintf("JWT keys in force: %d", len(ks.all))
	if n := len(ks.refused); n > 0 {
		detail += fmt.Sprintf(", refused: %d", n)
	}
	if ks.source != "" {
		detail += fmt.Sprintf(", from %s, fetched at %s", ks.source, ks.fetched.Format(time.RFC3339))
	}
	if ks.fetchErr != nil {
		detail += fmt.Sprintf("; the last fetch failed (%v): the keys stay in force until %s", ks.fetchErr, ks.expires.Format(time.RFC3339))
	}
	return true, detail
}

// checkRemote checks where keys are to be fetched from (jwks_url, or the
// issuer for discovery) and gives the durations left zero their defaults.
func checkRemote(cfg *config.JWT) error {
	src, what := cfg.JWKSURL, "jwks_url"
	if cfg.Discovery {
		src, what = cfg.Issuer, "issuer"
	}
	p, err := url.Parse(src)
	if err != nil {
		return fmt.Errorf("auth: %s %q is not a URL", what, src)
	}
	if why := config.KeyURLProblem(p); why != "" {
		return fmt.Errorf("auth: %s %q %s", what, src, why)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.JWKSRefresh, config.DefaultJWKSRefresh}, {&cfg.JWKSMaxStale, config.DefaultJWKSMaxStale}, {&cfg.JWKSTimeout, config.DefaultJWKSTimeout}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
