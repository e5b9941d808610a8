package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// keySet is one loaded JWKS, from a file or fetched. It is never modified
// once built, so requests read it without a lock. A key set whose err is
// set holds no key: the file was missing, empty, not a JWKS or had no
// usable key, or no fetch succeeded in time, and every JWT is refused
// until usable keys are loaded.
type keySet struct {
	raw     []byte              // the JWKS, to tell a change from a rewrite of the same
	isJWKS  bool                // raw is a JWKS (perhaps without a usable key)
	byKID   map[string][]verKey // keys with a kid
	all     []verKey            // every usable key, in file order
	refused []string            // keys left out, each with why, for the log
	err     error               // why there is no usable key; nil if there is

	// Of fetched keys only: where from, when, until when they may be used
	// (zero for a file: always), and why the last fetch since failed.
	source   string
	fetched  time.Time
	expires  time.Time
	fetchErr error
}

// verKey is one public key and the algorithms it may verify.
type verKey struct {
	kid  string
	key  any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// loadKeySet reads and parses the JWKS file at path. It always returns a
// key set; one that is not usable has err set, naming the file.
func loadKeySet(path string) *keySet {
	data, err := os.ReadFile(path)
	if err != nil {
		// The path is named once, below.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &keySet{err: fmt.Errorf("jwks_file %s: %w", path, err)}
	}
	ks := parseKeySet(data)
	if ks.err != nil {
		ks.err = fmt.Errorf("jwks_file %s: %w", path, ks.err)
	}
	return ks
}

// parseKeySet parses a JWKS. A key that cannot verify signatures
// (malformed, an encryption or symmetric key, an unsupported key type or
// curve, an alg that does not fit it) is left out and noted in refused;
// the other keys are kept. Data that is not a JWKS, or a set with no
// usable key, gives a key set with err set.
func parseKeySet(data []byte) *keySet {
	ks := &keySet{raw: data, byKID: map[string][]verKey{}}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		ks.err = fmt.Errorf("not a JWKS: %w", err)
		return ks
	}
	if set.Keys == nil {
		ks.err = errors.New(`not a JWKS: no "keys" array`)
		return ks
	}
	ks.isJWKS = true
	for i, raw := range set.Keys {
		k, name, why := parseKey(i, raw)
		if why != "" {
			ks.refused = append(ks.refused, name+": "+why)
			continue
		}
		ks.all = append(ks.all, k)
		if k.kid != "" {
			ks.byKID[k.kid] = append(ks.byKID[k.kid], k)
		}
	}
	if len(ks.all) == 0 {
		msg := "no key usable to verify signatures"
		if len(ks.refused) > 0 {
			msg += " (" + strings.Join(ks.refused, "; ") + ")"
		}
		ks.err = errors.New(msg)
	}
	return ks
}

// parseKey parses the i'th key of a JWKS. It returns the key, the name to
// report it by, and why it is refused ("" if it is not).
func parseKey(i int, raw json.RawMessage) (k verKey, name, why string) {
	name = fmt.Sprintf("key %d", i+1)
	var m jwkset.JWKMarshal
	if err := json.Unmarshal(raw, &m); err != nil {
		return k, name, fmt.Sprintf("not a JWK: %v", err)
	}
	if m.KID != "" {
		name = fmt.Sprintf("key %d (kid %q)", i+1, m.KID)
	}
	switch {
	case m.USE != "" && m.USE != jwkset.UseSig:
		return k, name, fmt.Sprintf("use is %q, not sig", m.USE)
	case len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify):
		return k, name, `key_ops lacks "verify"`
	case m.KTY == jwkset.KtyOct:
		return k, name, "symmetric keys are not accepted"
	}
	// Only the public part is read, even of a private key.
	jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
	if errors.Is(err, jwkset.ErrUnsupportedKey) {
		return k, name, "unsupported key type or curve"
	}
	if err != nil {
		// jwkset describes what is malformed without quoting key material.
		return k, name, fmt.Sprintf("malformed: %v", err)
	}
	algs := algsFor(jwk.Key())
	if algs == nil {
		return k, name, "not a signature key"
	}
	if m.ALG != "" {
		if !slices.Contains(algs, string(m.ALG)) {
			return k, name, fmt.Sprintf("alg %q is not a signature algorithm for this key", m.ALG)
		}
		algs = []string{string(m.ALG)}
	}
	return verKey{kid: m.KID, key: jwk.Key(), algs: algs}, name, ""
}

// same reports whether ks and o come from the same content with the same
// outcome, so that a reload that finds ks again changes nothing.
func (ks *keySet) same(o *keySet) bool {
	return bytes.Equal(ks.raw, o.raw) && errText(ks.err) == errText(o.err)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
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
			return nil, errUnknownKID
		}
	}
	for _, k := range candidates {
		if slices.Contains(k.algs, alg) {
			return k.key, nil
		}
	}
	return nil, fmt.Errorf("the token's key does not allow alg %s", alg)
}

// logRefused logs the keys parseKeySet left out, each with why, and
// where they come from (key "file" or "url").
func (ks *keySet) logRefused(log zerolog.Logger, key, where string) {
	for _, s := range ks.refused {
		log.Warn().Str(key, where).Msg("JWKS: refusing " + s)
	}
}
