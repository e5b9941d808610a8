package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// keySet is one loaded JWKS, from a file or fetched. It is never modified
// once built (absent aside), so requests read it without a lock. A key set whose err is
// set holds no key: the file was missing, empty, not a JWKS or had no
// usable key, or no fetch succeeded in time, and every JWT is refused
// until usable keys are loaded.
type keySet struct {
	// raw is the JWKS as the file holds it, or as jwkset holds a fetched
	// one: it tells a change from a rewrite of the same.
	raw     []byte
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
	// absent are the kids fetches were asked for and did not bring. It is
	// the one part that changes, and goes with the keys to every key set
	// of the same content (remoteKeys.fetched); nil for a file.
	absent *absentKIDs
}

// maxAbsentKIDs bounds the kids remembered as absent: a forged token can
// name any kid.
const maxAbsentKIDs = 1024

// absentKIDs is a bounded set of kids the identity provider does not have;
// once full, the oldest is forgotten for each new one. Kids are kept by
// their SHA-256, so that a long kid costs no more than a short one. Its
// methods do nothing on a nil set. Only tokens whose kid names no key
// reach it.
type absentKIDs struct {
	mu   sync.Mutex
	set  map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte // in the order added, up to maxAbsentKIDs
	next int                 // the oldest in ring, once it is full
}

func (a *absentKIDs) has(kid string) bool {
	if a == nil {
		return false
	}
	k := sha256.Sum256([]byte(kid))
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.set[k]
	return ok
}

func (a *absentKIDs) add(kid string) {
	if a == nil {
		return
	}
	k := sha256.Sum256([]byte(kid))
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.set[k]; ok {
		return
	}
	if a.set == nil {
		a.set = map[[sha256.Size]byte]struct{}{}
	}
	if len(a.ring) < maxAbsentKIDs {
		a.ring = append(a.ring, k)
	} else {
		delete(a.set, a.ring[a.next])
		a.ring[a.next] = k
		a.next = (a.next + 1) % maxAbsentKIDs
	}
	a.set[k] = struct{}{}
}

func (a *absentKIDs) len() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.set)
}

// verKey is one public key and the algorithms it may verify.
type verKey struct {
	kid  string
	key  any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs []string
}

// readOptions are how a file's JWK is read: as jwkset's HTTP storage reads
// a fetched one (private parts too, should a JWKS carry them; only the
// public key is ever used), so that a key means the same from either.
var readOptions = jwkset.JWKMarshalOptions{Private: true}

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

// parseKeySet parses a JWKS file. A key jwkset cannot read (malformed, an
// unsupported key type or curve) is refused like one verKeyOf refuses,
// and the other keys are kept. Data that is not a JWKS, or a set with no
// usable key, gives a key set with err set.
func parseKeySet(data []byte) *keySet {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return &keySet{raw: data, err: fmt.Errorf("not a JWKS: %w", err)}
	}
	if set.Keys == nil {
		return &keySet{raw: data, err: errors.New(`not a JWKS: no "keys" array`)}
	}
	ks := &keySet{raw: data, byKID: map[string][]verKey{}}
	for i, raw := range set.Keys {
		var m jwkset.JWKMarshal
		if err := json.Unmarshal(raw, &m); err != nil {
			ks.refuse(keyName(i, ""), fmt.Sprintf("not a JWK: %v", err))
			continue
		}
		jwk, err := jwkset.NewJWKFromMarshal(m, readOptions, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			ks.refuse(keyName(i, m.KID), "unsupported key type or curve")
		case err != nil:
			// jwkset describes what is malformed without quoting key material.
			ks.refuse(keyName(i, m.KID), fmt.Sprintf("malformed: %v", err))
		default:
			ks.add(i, jwk)
		}
	}
	ks.settle("")
	return ks
}

// keySetOf is the key set of keys as jwkset read them from the identity
// provider (raw as it holds them). jwkset leaves out key types it does not
// support and fails a whole fetch on a malformed key, so these are refused
// only by verKeyOf, and numbered among the keys jwkset kept.
func keySetOf(keys []jwkset.JWK, raw []byte) *keySet {
	ks := &keySet{raw: raw, byKID: map[string][]verKey{}}
	for i, k := range keys {
		ks.add(i, k)
	}
	ks.settle(` (jwkset read none: no "keys", an empty one, or only key types it does not support)`)
	return ks
}

// add puts the i'th key of a JWKS in ks, or notes why it is refused.
func (ks *keySet) add(i int, jwk jwkset.JWK) {
	k, why := verKeyOf(jwk)
	if why != "" {
		ks.refuse(keyName(i, k.kid), why)
		return
	}
	ks.all = append(ks.all, k)
	if k.kid != "" {
		ks.byKID[k.kid] = append(ks.byKID[k.kid], k)
	}
}

func (ks *keySet) refuse(name, why string) {
	ks.refused = append(ks.refused, name+": "+why)
}

// settle gives a key set without a usable key its err, saying why every
// key was refused, or noneRead when there was none to refuse.
func (ks *keySet) settle(noneRead string) {
	if len(ks.all) > 0 {
		return
	}
	why := noneRead
	if len(ks.refused) > 0 {
		why = " (" + strings.Join(ks.refused, "; ") + ")"
	}
	ks.err = errors.New("no key usable to verify signatures" + why)
}

// keyName is how the i'th key of a JWKS is reported.
func keyName(i int, kid string) string {
	if kid != "" {
		return fmt.Sprintf("key %d (kid %q)", i+1, kid)
	}
	return fmt.Sprintf("key %d", i+1)
}

// verKeyOf is the rule for every key, from a file or fetched: it returns
// the key as it may verify signatures, or why it may not (a key meant for
// encryption, a symmetric key, one that cannot sign, an alg that does not
// fit it). The returned kid is set either way.
func verKeyOf(jwk jwkset.JWK) (verKey, string) {
	m := jwk.Marshal()
	k := verKey{kid: m.KID}
	switch {
	case m.USE != "" && m.USE != jwkset.UseSig:
		return k, fmt.Sprintf("use is %q, not sig", m.USE)
	case len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify):
		return k, `key_ops lacks "verify"`
	case m.KTY == jwkset.KtyOct:
		return k, "symmetric keys are not accepted"
	}
	pub := jwk.Key()
	if priv, ok := pub.(crypto.Signer); ok {
		pub = priv.Public()
	}
	algs := algsFor(pub)
	if algs == nil {
		return k, "not a signature key"
	}
	if m.ALG != "" {
		if !slices.Contains(algs, string(m.ALG)) {
			return k, fmt.Sprintf("alg %q is not a signature algorithm for this key", m.ALG)
		}
		algs = []string{string(m.ALG)}
	}
	k.key, k.algs = pub, algs
	return k, ""
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

// logRefused logs the keys left out, each with why, and where they come
// from (key "file" or "url").
func (ks *keySet) logRefused(log zerolog.Logger, key, where string) {
	for _, s := range ks.refused {
		log.Warn().Str(key, where).Msg("JWKS: refusing " + s)
	}
}
