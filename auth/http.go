package auth

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// Realm is the realm of the WWW-Authenticate challenge.
const Realm = "mcpmux"

// Middleware authenticates each request. On success it calls next with
// setCaller(ctx, identity, claims) as the request's context, claims being
// those of the JWT that named the identity (nil for other credentials). On failure it answers
// 401 with a Bearer WWW-Authenticate challenge (realm, resource_metadata when
// JWT is configured, and error="invalid_token" when a token was presented
// but rejected) and a body that says nothing more, and logs one Warn line
// with the reason and the remote address, never the credential.
func (a *Authenticator) Middleware(next http.Handler, setCaller func(ctx context.Context, identity string, claims Claims) context.Context) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		identity, claims, presented, err := a.authenticate(r)
		if err != nil {
			a.refuse(w, r, presented, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(setCaller(r.Context(), identity, claims)))
	})
}

// refuse answers 401 and logs why.
func (a *Authenticator) refuse(w http.ResponseWriter, r *http.Request, presented bool, err error) {
	// err's text never holds the credential: it comes from this package or
	// from the JWT library, which describe what is wrong with a token
	// without quoting it.
	a.log.Warn().
		Str("reason", Reason(err)).
		Str("remote", r.RemoteAddr).
		Str("method", r.Method).
		Str("path", r.URL.Path).
		Str("detail", err.Error()).
		Msg("HTTP request refused: not authenticated")

	h := w.Header()
	h.Set("WWW-Authenticate", a.challenge(r, presented))
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("unauthorized\n"))
}

// challenge is the WWW-Authenticate value for a refused request, per RFC
// 6750 §3 and the MCP authorization spec (RFC 9728 §5.1).
func (a *Authenticator) challenge(r *http.Request, presented bool) string {
	var b strings.Builder
	b.WriteString(`Bearer realm="` + Realm + `"`)
	if a.jwt != nil {
		u := a.jwt.metadataURL
		if u == "" {
			u = requestOrigin(r) + a.jwt.metadataPath
		}
		if u != "" && !strings.ContainsAny(u, "\"\\") {
			b.WriteString(`, resource_metadata="` + u + `"`)
		}
	}
	if presented {
		b.WriteString(`, error="invalid_token"`)
	}
	return b.String()
}

// MetadataHandler returns the path at which to serve the OAuth 2.0
// protected resource metadata (RFC 9728) and its handler: resource is the
// JWT audience, authorization_servers the configured ones (default: the
// issuer), bearer_methods_supported ["header"]. The path is
// /.well-known/oauth-protected-resource followed by the audience's path
// (RFC 9728 §3.1): for audience https://host/mcp it is
// /.well-known/oauth-protected-resource/mcp. It must be served without
// authentication. Without JWT it returns "" and nil.
func (a *Authenticator) MetadataHandler() (path string, h http.Handler) {
	if a.jwt == nil {
		return "", nil
	}
	return a.jwt.metadataPath, a.jwt.metadata
}

// originOf returns "scheme://host" of an absolute http(s) URL, or "".
func originOf(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// requestOrigin guesses the origin a request was sent to, for an audience
// that is not a URL.
func requestOrigin(r *http.Request) string {
	if r.Host == "" {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
