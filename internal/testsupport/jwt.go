package testsupport

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// JWT test fixtures: an issuer, mcpmux's audience, and RSA keys generated
// once per test binary.
const (
	JWTIssuer   = "https://issuer.example"
	JWTAudience = "https://mcpmux.example/mcp"
	// The protected-resource metadata of JWTAudience is at this path of its
	// origin (RFC 9728 §3.1); mcpmux serves the path on its listener.
	JWTMetadataPath = "/.well-known/oauth-protected-resource/mcp"
	JWTMetadata     = "https://mcpmux.example" + JWTMetadataPath
)

var (
	RSAKeyA     = sync.OnceValue(genRSA)
	RSAKeyB     = sync.OnceValue(genRSA)
	RSAStranger = sync.OnceValue(genRSA)
)

func genRSA() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
}

// JWKS returns a JWKS holding the public halves of keys, by kid.
func JWKS(t testing.TB, keys map[string]*rsa.PrivateKey) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, kid := range slices.Sorted(maps.Keys(keys)) {
		j, err := jwkset.NewJWKFromKey(&keys[kid].PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SignJWT signs claims valid for alice, with changes applied (nil deletes a
// claim), with key under kid.
func SignJWT(t testing.TB, key *rsa.PrivateKey, kid string, changes map[string]any) string {
	t.Helper()
	now := time.Now()
	c := jwt.MapClaims{
		"iss": JWTIssuer,
		"aud": JWTAudience,
		"sub": "alice",
		"iat": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	for k, v := range changes {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
