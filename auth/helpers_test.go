package auth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "https://mcp.example.com/mcp"
)

// Keys are generated once per test binary: RSA generation is slow under
// the race detector.
var (
	rsaKey1  = sync.OnceValue(func() *rsa.PrivateKey { return genRSA() })
	rsaKey2  = sync.OnceValue(func() *rsa.PrivateKey { return genRSA() })
	rsaOther = sync.OnceValue(func() *rsa.PrivateKey { return genRSA() })
	ecKey1   = sync.OnceValue(func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
	edKey1 = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func genRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// jwkEntry is one key to put in a test JWKS.
type jwkEntry struct {
	kid string
	pub any
	alg jwkset.ALG
	use jwkset.USE
}

// jwksJSON returns a JWKS holding keys.
func jwksJSON(t testing.TB, keys ...jwkEntry) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	set.Keys = []jwkset.JWKMarshal{}
	for _, k := range keys {
		use := k.use
		if use == "" {
			use = jwkset.UseSig
		}
		// A private key is written with its private parts, as a careless
		// provider might publish it.
		j, err := jwkset.NewJWKFromKey(k.pub, jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: use},
			Marshal:  jwkset.JWKMarshalOptions{Private: true},
		})
		if err != nil {
			t.Fatalf("JWK for %s: %v", k.kid, err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// defaultKeys is the JWKS most tests use: an RSA and an EC key.
func defaultKeys() []jwkEntry {
	return []jwkEntry{
		{kid: "rsa1", pub: &rsaKey1().PublicKey},
		{kid: "ec1", pub: &ecKey1().PublicKey},
	}
}

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

const (
	bobToken   = "bob-secret-token-0123456789"
	carolToken = "carol-secret-token-9876543210"
)

// testUpstream is an upstream with tokens and JWT configured and a JWKS
// file holding keys (defaultKeys if none are given).
func testUpstream(t testing.TB, keys ...jwkEntry) config.Upstream {
	t.Helper()
	if keys == nil {
		keys = defaultKeys()
	}
	file := filepath.Join(t.TempDir(), "jwks.json")
	testsupport.ReplaceFile(t, file, jwksJSON(t, keys...))
	return config.Upstream{
		Identity: "stdio-user",
		Listen:   "127.0.0.1:0",
		Path:     "/mcp",
		Tokens: []config.Token{
			{Identity: "bob", SHA256: sha256Hex(bobToken), Line: 10},
			{Identity: "carol", Env: "CAROL_TOKEN", Value: carolToken, Line: 14},
		},
		JWT: &config.JWT{
			Issuer:   testIssuer,
			Audience: testAudience,
			JWKSFile: file,
		},
	}
}

// claims returns valid claims for alice, with changes applied (a nil
// value deletes the claim).
func claims(changes map[string]any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"iss": testIssuer,
		"aud": testAudience,
		"sub": "alice",
		"exp": now.Add(time.Hour).Unix(),
		"iat": now.Unix(),
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign makes a JWT; kid "" leaves the header out.
func sign(t testing.TB, m jwt.SigningMethod, key any, kid string, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("signing with %s: %v", m.Alg(), err)
	}
	return s
}

// logBuffer collects log output; the server writes it from its own
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns the lines logged since the last take, decoded.
func (l *logBuffer) take(t *testing.T) (raw string, lines []map[string]any) {
	t.Helper()
	l.mu.Lock()
	raw = l.b.String()
	l.b.Reset()
	l.mu.Unlock()
	for line := range strings.Lines(raw) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	return raw, lines
}

func newLogger() (*logBuffer, zerolog.Logger) {
	b := &logBuffer{}
	return b, zerolog.New(b)
}

func mustNew(t *testing.T, up config.Upstream) (*Authenticator, *logBuffer) {
	t.Helper()
	buf, log := newLogger()
	a, err := New(up, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	buf.take(t)
	return a, buf
}

type identityKey struct{}

func withIdentity(ctx context.Context, id string, _ Claims) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// echo answers 200 with the identity in the request's context.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	id, _ := r.Context().Value(identityKey{}).(string)
	_, _ = w.Write([]byte(id))
})
