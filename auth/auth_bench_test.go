package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

func benchAuthenticate(b *testing.B, a *Authenticator, tok, want string) {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	for b.Loop() {
		if id, err := a.Authenticate(r); err != nil || id != want {
			b.Fatalf("Authenticate = %q, %v", id, err)
		}
	}
}

// A static bearer token: what keys from a URL must not make dearer.
func BenchmarkAuthenticateToken(b *testing.B) {
	a, err := New(testUpstream(b), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	benchAuthenticate(b, a, bobToken, "bob")
}

// A JWT verified with a key from a file.
func BenchmarkAuthenticateJWTFile(b *testing.B) {
	a, err := New(testUpstream(b), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	benchAuthenticate(b, a, sign(b, jwt.SigningMethodES256, ecKey1(), "ec1", claims(nil)), "alice")
}

// A JWT verified with a key fetched from the identity provider.
func BenchmarkAuthenticateJWTFetched(b *testing.B) {
	idp := ts.StartIdP(b, jwksJSON(b, defaultKeys()...))
	a, err := New(remoteUpstream(idp.JWKSURL()), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	a.jwt.remote.client = keyClient(idp.Transport(), a.jwt.remote.cfg.JWKSTimeout)
	fetched := make(chan struct{}, 1)
	a.jwt.remote.testHookFetch = func(error) {
		select {
		case fetched <- struct{}{}:
		default:
		}
	}
	ctx, done := b.Context(), make(chan struct{})
	go func() { _ = a.Watch(ctx); close(done) }()
	b.Cleanup(func() { <-done })
	<-fetched
	benchAuthenticate(b, a, sign(b, jwt.SigningMethodES256, ecKey1(), "ec1", claims(nil)), "alice")
}
