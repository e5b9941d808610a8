package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// hostnameRE matches a host name as listen addresses may use it.
var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

func (d *decoder) upstream(t *table, u *Upstream) {
	*u = Upstream{
		Path:               DefaultPath,
		SessionIdleTimeout: DefaultSessionIdleTimeout,
		DrainTimeout:       DefaultDrainTimeout,
	}
	if t.str("identity", &u.Identity) {
		if u.Identity == "" {
			t.errorf("identity", "must not be empty (leave the key out to configure no identity)")
		} else if msg := identityProblem(u.Identity); msg != "" {
			t.errorf("identity", "%s", msg)
		}
	}
	listenOK := t.address("listen", &u.Listen)
	if t.str("path", &u.Path) {
		if msg := pathProblem(u.Path); msg != "" {
			t.errorf("path", "%s", msg)
		}
	}
	if t.address("admin_listen", &u.AdminListen) && listenOK &&
		u.Listen != "" && u.AdminListen != "" && sameAddress(u.Listen, u.AdminListen) {
		t.errorf("admin_listen", "must differ from listen (%q): set another port, or leave admin_listen out to serve /healthz, /readyz and /metrics on listen", u.Listen)
	}
	if t.address("debug_listen", &u.DebugListen) && u.DebugListen != "" {
		host, _, _ := net.SplitHostPort(u.DebugListen)
		switch {
		case !loopback(host):
			t.errorf("debug_listen", "%q is not a loopback address: profiles show mcpmux's memory and code to whoever reaches them; use 127.0.0.1:PORT or [::1]:PORT, and port-forward to reach it from elsewhere", u.DebugListen)
		case listenOK && u.Listen != "" && sameAddress(u.Listen, u.DebugListen):
			t.errorf("debug_listen", "must differ from listen (%q)", u.Listen)
		case u.AdminListen != "" && sameAddress(u.AdminListen, u.DebugListen):
			t.errorf("debug_listen", "must differ from admin_listen (%q)", u.AdminListen)
		}
	}
	t.boolean("allow_unauthenticated", &u.AllowUnauthenticated)
	u.Tokens = d.tokens(t)
	jt := t.table("jwt") // empty when left out
	if _, ok := t.m["jwt"]; ok && jt.m != nil {
		u.JWT = d.jwt(jt)
	}
	if t.str("trusted_header", &u.TrustedHeader) && u.TrustedHeader != "" && !validHeaderName(u.TrustedHeader) {
		t.errorf("trusted_header", `invalid header name %q: use letters, digits and !#$%%&'*+-.^_`+"`"+`|~, such as "X-Forwarded-User"`, u.TrustedHeader)
	}
	if t.boolean("trusted_header_with_tokens", &u.TrustedHeaderWithTokens) && u.TrustedHeaderWithTokens && u.TrustedHeader == "" {
		t.errorf("trusted_header_with_tokens", "has no effect without trusted_header")
	}
	if u.TrustedHeader != "" && !u.TrustedHeaderWithTokens && (len(u.Tokens) > 0 || u.JWT != nil) {
		t.errorf("trusted_header", "is configured together with tokens or jwt: a request without a bearer token would be taken at the header's word. Use one, or set trusted_header_with_tokens = true to accept both (a request with an Authorization header is then judged by it alone)")
	}
	t.duration("session_idle_timeout", &u.SessionIdleTimeout)
	t.durationFrom("drain_timeout", &u.DrainTimeout, true)
	t.durationFrom("drain_delay", &u.DrainDelay, true)
	t.refuse(upstreamLater)
	t.finish()

	// Authentication given in the file counts even when some of it is in
	// error (already reported): the problem to fix is that one.
	authGiven := u.AuthConfigured() || u.TrustedHeader != "" ||
		t.m["jwt"] != nil || !isEmptyArray(t.m["tokens"])
	if listenOK && !authGiven {
		if msg := u.exposureProblem(); msg != "" {
			t.errorf("listen", "%s", msg)
		}
	}
}

// CheckListen checks Listen as the file's listen is checked, for a Listen
// set other than by the file (say, by a flag): a valid host:port (or ""),
// not colliding with AdminListen, and not beyond loopback unless
// AuthConfigured or AllowUnauthenticated.
func (u Upstream) CheckListen() error {
	if u.Listen == "" {
		return nil
	}
	if msgs := addressProblems(u.Listen); len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	if u.AdminListen != "" && sameAddress(u.Listen, u.AdminListen) {
		return fmt.Errorf("%q is also [upstream] admin_listen: the two must differ", u.Listen)
	}
	if !u.AuthConfigured() {
		if msg := u.exposureProblem(); msg != "" {
			return errors.New(msg)
		}
	}
	return nil
}

// exposureProblem says why a valid Listen without authentication may not
// be served, or "". It does not look at authentication.
func (u Upstream) exposureProblem() string {
	if u.Listen == "" || u.AllowUnauthenticated {
		return ""
	}
	host, _, _ := net.SplitHostPort(u.Listen)
	if loopback(host) {
		return ""
	}
	why := "is not a loopback address"
	if host == "" {
		why = "listens on every interface"
	}
	return fmt.Sprintf("%q %s, so it needs authentication: add [[upstream.tokens]], [upstream.jwt] or trusted_header, "+
		"or set allow_unauthenticated = true to let any caller in as [upstream] identity", u.Listen, why)
}

// AuthConfigured reports whether any authentication of HTTP callers is
// configured: bearer tokens, JWTs or a trusted header. When it is not, every
// HTTP caller is Identity.
func (u Upstream) AuthConfigured() bool {
	return len(u.Tokens) > 0 || u.JWT != nil || u.TrustedHeader != ""
}

var identityRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidIdentity reports whether name is a valid identity name: letters,
// digits, '.', '_' and '-', starting with a letter or digit. An identity
// given other than in the file (say, by a flag) should be checked with it.
func ValidIdentity(name string) bool {
	return identityRE.MatchString(name)
}

// identityProblem says what is wrong with a non-empty identity, or "".
func identityProblem(id string) string {
	if ValidIdentity(id) {
		return ""
	}
	return fmt.Sprintf("invalid identity %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", id)
}

// address decodes a "host:port" listen address; "" means none. It reports
// true when the key is present with a valid value.
func (t *table) address(key string, dst *string) bool {
	var addr string
	if !t.str(key, &addr) {
		return false
	}
	if addr == "" {
		*dst = ""
		return true
	}
	msgs := addressProblems(addr)
	for _, msg := range msgs {
		t.errorf(key, "%s", msg)
	}
	if len(msgs) > 0 {
		return false
	}
	*dst = addr
	return true
}

// addressProblems says what is wrong with a non-empty host:port listen
// address.
func addressProblems(addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{fmt.Sprintf(`invalid address %q: use host:port, such as "127.0.0.1:7300", "[::1]:7300" or ":7300" (every interface)`, addr)}
	}
	var msgs []string
	if _, err := netip.ParseAddr(host); err != nil && host != "" && !hostnameRE.MatchString(host) {
		msgs = append(msgs, fmt.Sprintf("invalid host %q in %q: use an IP address or a host name", host, addr))
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		msgs = append(msgs, fmt.Sprintf("invalid port %q in %q: use a number from 0 to 65535", port, addr))
	}
	return msgs
}

// sameAddress reports whether two valid listen addresses would collide: the
// same fixed port on the same host, or on every interface for either.
// Port 0 picks a free port, so never collides.
func sameAddress(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	na, _ := strconv.Atoi(pa)
	nb, _ := strconv.Atoi(pb)
	if na == 0 || na != nb {
		return false
	}
	return ha == "" || hb == "" || strings.EqualFold(ha, hb)
}

// loopback reports whether host (from a listen address) is on the loopback
// interface only: "localhost", 127.0.0.0/8 or ::1. "" is every interface.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// pathProblem says what is wrong with the HTTP path MCP is served on, or "".
func pathProblem(p string) string {
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf(`must start with "/", not %q`, p)
	}
	if i := strings.IndexFunc(p, func(r rune) bool {
		return r <= ' ' || r == 0x7f || r == '?' || r == '#'
	}); i >= 0 {
		return fmt.Sprintf("invalid path %q: spaces, control characters, '?' and '#' are not allowed", p)
	}
	return ""
}

// validHeaderName reports whether name is an HTTP header field name: one or
// more token characters (RFC 9110, section 5.1).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v may be sent as an HTTP header value:
// no control characters other than tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func isEmptyArray(v any) bool {
	a, ok := v.([]any)
	return v == nil || ok && len(a) == 0
}

// tokens decodes [[upstream.tokens]] (or tokens = [{...}, ...]).
func (d *decoder) tokens(t *table) []Token {
	raw, ok := t.lookup("tokens")
	if !ok {
		return nil
	}
	arr, ok := raw.([]any)
	if !ok {
		t.typeError("tokens", "an array of tables ([[upstream.tokens]])", raw)
		return nil
	}
	type entry struct{ i, line int }
	seen := make(map[[sha256.Size]byte]entry)
	var list []Token
	for i, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			t.elemErrorf("tokens", i, "must be a table, not %s", typeName(e))
			continue
		}
		et := d.elemTable(t, "tokens", i, m)
		tok, digest, ok := d.token(et)
		if !ok {
			continue
		}
		if tok.Env != "" && tok.Value == "" {
			// Unresolved (offline): no digest to compare.
			list = append(list, tok)
			continue
		}
		if prev, dup := seen[digest]; dup {
			et.selfErrorf("the same token as tokens[%d] (line %d): each token stands for one identity", prev.i, prev.line)
			continue
		}
		seen[digest] = entry{i, tok.Line}
		list = append(list, tok)
	}
	return list
}

// token decodes one tokens entry and returns it with the SHA-256 digest of
// the token. Token values are never shown in messages.
func (d *decoder) token(t *table) (Token, [sha256.Size]byte, bool) {
	tok := Token{Line: d.ix.Line(t.path)}
	var digest [sha256.Size]byte
	good := true
	if t.str("identity", &tok.Identity) {
		if tok.Identity == "" {
			t.errorf("identity", "must not be empty")
			good = false
		} else if msg := identityProblem(tok.Identity); msg != "" {
			t.errorf("identity", "%s", msg)
			good = false
		}
	} else {
		if _, ok := t.m["identity"]; !ok {
			t.selfErrorf("identity is required: the identity the token stands for")
		}
		good = false
	}
	_, hasSHA := t.m["sha256"]
	_, hasEnv := t.m["env"]
	switch {
	case hasSHA && hasEnv:
		t.selfErrorf("set either sha256 or env, not both")
		good = false
	case !hasSHA && !hasEnv:
		t.selfErrorf("sha256 or env is required: the SHA-256 digest of the token, or the variable holding it")
		good = false
	}
	if t.str("sha256", &tok.SHA256) {
		b, err := hex.DecodeString(tok.SHA256)
		if err != nil || len(b) != sha256.Size {
			// Never echo the value: it may be the token itself.
			t.errorf("sha256", "must be the SHA-256 digest of the token as 64 hexadecimal digits (not the token itself)")
			good = false
		} else {
			tok.SHA256 = strings.ToLower(tok.SHA256)
			copy(digest[:], b)
		}
	} else if hasSHA {
		good = false
	}
	if t.str("env", &tok.Env) {
		v, ok := d.getenv(tok.Env)
		switch {
		case !envNameRE.MatchString(tok.Env):
			t.errorf("env", "invalid variable name %q", tok.Env)
			good = false
		// The value is serve's alone: without it the token is kept, and
		// only serve refuses the config (see secretf).
		case !ok:
			t.secretf("env", "environment variable %s is not set", tok.Env)
		case v == "":
			t.secretf("env", "environment variable %s is empty", tok.Env)
		default:
			tok.Value = v
			digest = sha256.Sum256([]byte(v))
		}
	} else if hasEnv {
		good = false
	}
	t.finish()
	return tok, digest, good
}

// jwt decodes [upstream.jwt].
func (d *decoder) jwt(t *table) *JWT {
	j := &JWT{IdentityClaim: DefaultIdentityClaim}
	required := func(key, what string, dst *string) {
		if t.str(key, dst) {
			if *dst == "" {
				t.errorf(key, "must not be empty")
			}
		} else if _, ok := t.m[key]; !ok {
			t.selfErrorf("%s is required: %s", key, what)
		}
	}
	required("issuer", "the iss of accepted tokens", &j.Issuer)
	required("audience", "mcpmux's own URL, the aud of accepted tokens", &j.Audience)
	var jwks string
	sources := 0
	if t.str("jwks_file", &jwks) {
		sources++
		if jwks == "" {
			t.errorf("jwks_file", "must not be empty")
		} else {
			j.JWKSFile = d.abs(jwks)
		}
	}
	if t.str("jwks_url", &j.JWKSURL) {
		sources++
		if why := keyURLProblem(j.JWKSURL); why != "" {
			t.errorf("jwks_url", "%q %s", j.JWKSURL, why)
		}
	}
	if t.boolean("discovery", &j.Discovery) && j.Discovery {
		sources++
		if why := keyURLProblem(j.Issuer); j.Issuer != "" && why != "" {
			t.errorf("discovery", "needs an issuer to discover keys from, and issuer %q %s", j.Issuer, why)
		}
	}
	switch {
	case sources == 0:
		t.selfErrorf("the issuer's public keys are required: set jwks_url (the identity provider's JWKS), discovery = true (find it from issuer's /.well-known/openid-configuration) or jwks_file (a local JWKS)")
	case sources > 1:
		t.selfErrorf("set only one of jwks_file, jwks_url and discovery = true: they are alternative sources of the same keys")
	}
	fetched := j.JWKSURL != "" || j.Discovery
	if fetched {
		j.JWKSRefresh, j.JWKSMaxStale, j.JWKSTimeout = DefaultJWKSRefresh, DefaultJWKSMaxStale, DefaultJWKSTimeout
	}
	for _, k := range []struct {
		key string
		dst *time.Duration
	}{{"jwks_refresh", &j.JWKSRefresh}, {"jwks_max_stale", &j.JWKSMaxStale}, {"jwks_timeout", &j.JWKSTimeout}} {
		if t.duration(k.key, k.dst) && !fetched {
			t.errorf(k.key, "applies only to keys fetched from jwks_url or by discovery")
		}
	}
	if fetched && j.JWKSRefresh >= j.JWKSMaxStale {
		t.errorf("jwks_max_stale", "(%s) must be longer than jwks_refresh (%s): keys would expire between two fetches even when the provider answers", j.JWKSMaxStale, j.JWKSRefresh)
	}
	if t.str("identity_claim", &j.IdentityClaim) && j.IdentityClaim == "" {
		t.errorf("identity_claim", "must not be empty")
	}
	if t.strs("authorization_servers", &j.AuthorizationServers) {
		if len(j.AuthorizationServers) == 0 {
			t.errorf("authorization_servers", "must not be empty (leave the key out to advertise issuer)")
		}
		for i, s := range j.AuthorizationServers {
			if s == "" {
				t.elemErrorf("authorization_servers", i, "must not be empty")
			}
		}
	} else if j.Issuer != "" {
		j.AuthorizationServers = []string{j.Issuer}
	}
	t.finish()
	return j
}

// KeyURLProblem says why u cannot be where JWT keys are fetched from, or
// "" if it can: keys decide who may do what, so they come over HTTPS, or
// plain HTTP to this machine only (a test's identity provider). It applies
// to a configured URL and to every URL reached from one (a redirect, a
// discovered jwks_uri).
func KeyURLProblem(u *url.URL) string {
	switch {
	case u.Host == "" || u.Opaque != "":
		return "is not an absolute URL"
	case u.Scheme == "https":
		return ""
	case u.Scheme == "http" && loopback(u.Hostname()):
		return ""
	case u.Scheme == "http":
		return "is plain HTTP to another machine: keys must come over https (http only to a loopback address, for tests)"
	}
	return "must be an https URL"
}

// keyURLProblem is KeyURLProblem for a URL as written.
func keyURLProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "is not an absolute URL"
	}
	return KeyURLProblem(u)
}
