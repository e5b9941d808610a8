package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// keySet is one loaded JWKS file. It is never modified once built, so
// requests read it without a lock.
type keySet struct {
	raw     []byte              // the file's content, to skip reloads that change nothing
	byKID   map[string][]verKey // keys with a kid
	all     []verKey            // every usable key, in file order
	skipped []string            // why keys were left out, for the log
}

// verKey is one public key and the algorithms it may verify.
type verKey struct {
	kid  string
	key  any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// loadKeySet reads and parses the JWKS file at path.
func loadKeySet(path string) (*keySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeySet(data)
}

// parseKeySet parses a JWKS. Keys that cannot verify signatures (encryption
// keys, symmetric keys, unsupported key types or curves) are left out and
// noted in skipped; a malformed key, or a set with no usable key, is an
// error.
func parseKeySet(data []byte) (*keySet, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS: %w", err)
	}
	if set.Keys == nil {
		return nil, errors.New(`not a JWKS: no "keys" array`)
	}
	ks := &keySet{raw: data, byKID: map[string][]verKey{}}
	for i, raw := range set.Keys {
		var m jwkset.JWKMarshal
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		name := fmt.Sprintf("key %d", i+1)
		if m.KID != "" {
			name = fmt.Sprintf("key %d (kid %q)", i+1, m.KID)
		}
		skip := func(why string) { ks.skipped = append(ks.skipped, name+": "+why) }
		if m.USE != "" && m.USE != jwkset.UseSig {
			skip(fmt.Sprintf("use is %q, not sig", m.USE))
			continue
		}
		if len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify) {
			skip(`key_ops lacks "verify"`)
			continue
		}
		if m.KTY == jwkset.KtyOct {
			skip("symmetric keys are not accepted")
			continue
		}
		// Only the public part is read, even of a private key.
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if errors.Is(err, jwkset.ErrUnsupportedKey) {
			skip("unsupported key type or curve")
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		algs := algsFor(jwk.Key())
		if algs == nil {
			skip("not a signature key")
			continue
		}
		if m.ALG != "" {
			if !slices.Contains(algs, string(m.ALG)) {
				skip(fmt.Sprintf("alg %q is not a signature algorithm for this key", m.ALG))
				continue
			}
			algs = []string{string(m.ALG)}
		}
		k := verKey{kid: m.KID, key: jwk.Key(), algs: algs}
		ks.all = append(ks.all, k)
		if k.kid != "" {
			ks.byKID[k.kid] = append(ks.byKID[k.kid], k)
		}
	}
	if len(ks.all) == 0 {
		return nil, errors.New("no key usable to verify signatures")
	}
	return ks, nil
}

// algsFor returns the JWS algorithms a public key may verify, or nil.
func algsFor(key any) []string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		switch k.Curve.Params().Name {
		case "P-256":
			return []string{"ES256"}
		case "P-384":
			return []string{"ES384"}
		case "P-521":
			return []string{"ES512"}
		}
	case ed25519.PublicKey:
		return []string{"EdDSA"}
	}
	return nil
}

// keyFunc is the jwt.Keyfunc for tokens verified against ks: the key named
// by the token's kid (or the only key, for a token without kid) that allows
// the token's algorithm.
func (ks *keySet) keyFunc(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	var candidates []verKey
	switch kid, ok := t.Header["kid"]; {
	case !ok:
		if len(ks.all) != 1 {
			return nil, errors.New("token has no kid and the JWKS has several keys")
		}
		candidates = ks.all
	default:
		s, isString := kid.(string)
		if !isString {
			return nil, errors.New("kid is not a string")
		}
		candidates = ks.byKID[s]
		if len(candidates) == 0 {
			return nil, errors.New("no key with the token's kid")
		}
	}
	for _, k := range candidates {
		if slices.Contains(k.algs, alg) {
			return k.key, nil
		}
	}
	return nil, fmt.Errorf("the token's key does not allow alg %s", alg)
}

// logSkipped logs the keys parseKeySet left out.
func (ks *keySet) logSkipped(log zerolog.Logger, file string) {
	for _, s := range ks.skipped {
		log.Warn().Str("file", file).Msg("JWKS: ignoring " + s)
	}
}
