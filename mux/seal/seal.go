// Package seal owns what the replicas of one mcpmux deployment share: the
// key ring (a current and a previous key, read from a file such as a
// Kubernetes Secret mount and read again when it changes) and the ids
// sealed under it. A sealed id names the replica that owns what it stands
// for (a 2025-11-25 session, a round's requestState, a task) and that
// replica's local id; only a holder of a key of the ring can make one or
// read it, and nobody can change one unnoticed. The ring also signs the requests
// one replica forwards to another (MAC, CheckMAC).
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// ErrOpen is what Open answers for an id that is not one the ring's keys
// sealed for that purpose: tampered with, truncated, sealed under a key
// the ring no longer holds (or never held), or sealed for another purpose.
// Callers treat such an id as one that names nothing.
var ErrOpen = errors.New("seal: the id cannot be opened with the current or previous key")

// ErrKeyFile is what a key file that cannot be used is refused with.
var ErrKeyFile = errors.New("seal: unusable key file")

// KeySize is the size of each key: AES-256.
const KeySize = 32

// version is the first byte of every sealed id: its format.
const version = 1

// keyIDSize is how many bytes of a key's digest name it in an id, so that
// Open tries the one key that sealed it.
const keyIDSize = 4

// key is one key of the ring.
type key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
	mac  []byte // the key peer requests are signed with, derived from it
}

// Keys are the keys in force: Current seals, both open.
type Keys struct {
	current  *key
	previous *key // nil when the file holds one key
}

// Ring is the key ring: the keys in force, replaced whole by Set (a
// reload of the key file); safe for concurrent use, and a call only reads
// one atomic pointer.
type Ring struct {
	keys atomic.Pointer[Keys]
}

// NewRing returns a ring holding k.
func NewRing(k *Keys) *Ring {
	r := &Ring{}
	r.keys.Store(k)
	return r
}

// Set puts k in force: ids are sealed with its current key from now on.
func (r *Ring) Set(k *Keys) { r.keys.Store(k) }

// Fingerprints names the keys in force (the key ids, in hex: current, then
// previous if any), for the log; they say nothing of the keys.
func (r *Ring) Fingerprints() []string {
	k := r.keys.Load()
	out := []string{fmt.Sprintf("%x", k.current.id)}
	if k.previous != nil {
		out = append(out, fmt.Sprintf("%x", k.previous.id))
	}
	return out
}

// ReadKeys reads a key file: one key per line, base64 (standard or URL
// alphabet, padded or not) of KeySize random bytes; the first is the
// current key, a second (optional) the previous. Blank lines and lines
// starting with '#' are skipped.
func ReadKeys(path string) (*Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrKeyFile, path, err)
	}
	k, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ParseKeys parses the contents of a key file (see ReadKeys).
func ParseKeys(b []byte) (*Keys, error) {
	var raws [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := decodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrKeyFile, i+1, err)
		}
		raws = append(raws, raw)
	}
	switch {
	case len(raws) == 0:
		return nil, fmt.Errorf("%w: no key: write one base64 key of %d random bytes per line, the current first", ErrKeyFile, KeySize)
	case len(raws) > 2:
		return nil, fmt.Errorf("%w: %d keys: a key file holds the current key and at most one previous key", ErrKeyFile, len(raws))
	case len(raws) == 2 && bytes.Equal(raws[0], raws[1]):
		return nil, fmt.Errorf("%w: the previous key is the current key", ErrKeyFile)
	}
	k := &Keys{}
	for i, raw := range raws {
		kk, err := newKey(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
		}
		if i == 0 {
			k.current = kk
		} else {
			k.previous = kk
		}
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(s); err == nil {
			if len(raw) != KeySize {
				return nil, fmt.Errorf("a key is %d bytes, not %d", KeySize, len(raw))
			}
			return raw, nil
		}
	}
	return nil, errors.New("not base64")
}

func newKey(raw []byte) (*key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &key{aead: aead, mac: derive(raw, "mcpmux peer requests v1")}
	copy(k.id[:], derive(raw, "mcpmux key id v1"))
	return k, nil
}

// derive is a key of its own for purpose, from raw: HMAC-SHA256(raw,
// purpose), so that the AEAD key is never used for anything else.
func derive(raw []byte, purpose string) []byte {
	m := hmac.New(sha256.New, raw)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Seal returns the id naming local at owner, sealed with the current key
// for purpose (say "session"): an id sealed for one purpose never opens
// for another. The id is URL-safe base64.
func (r *Ring) Seal(purpose, owner, local string) string {
	k := r.keys.Load().current
	plain := binary.AppendUvarint(make([]byte, 0, 2+len(owner)+len(local)), uint64(len(owner)))
	plain = append(plain, owner...)
	plain = append(plain, local...)
	head := make([]byte, 1+keyIDSize+k.aead.NonceSize(), 1+keyIDSize+k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	head[0] = version
	copy(head[1:], k.id[:])
	_, _ = rand.Read(head[1+keyIDSize:]) // crypto/rand never fails
	out := k.aead.Seal(head, head[1+keyIDSize:], plain, additional(purpose, head[:1+keyIDSize]))
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open returns the owner and local id that id, sealed for purpose by Seal
// with a key of the ring, names; ErrOpen for any other id.
func (r *Ring) Open(purpose, id string) (owner, local string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) < 1+keyIDSize || b[0] != version {
		return "", "", ErrOpen
	}
	ks := r.keys.Load()
	var k *key
	for _, c := range []*key{ks.current, ks.previous} {
		if c != nil && bytes.Equal(c.id[:], b[1:1+keyIDSize]) {
			k = c
			break
		}
	}
	if k == nil || len(b) < 1+keyIDSize+k.aead.NonceSize()+k.aead.Overhead() {
		return "", "", ErrOpen
	}
	nonce := b[1+keyIDSize : 1+keyIDSize+k.aead.NonceSize()]
	plain, err := k.aead.Open(nil, nonce, b[len(nonce)+1+keyIDSize:], additional(purpose, b[:1+keyIDSize]))
	if err != nil {
		return "", "", ErrOpen
	}
	n, w := binary.Uvarint(plain)
	if w <= 0 || n > uint64(len(plain)-w) {
		return "", "", ErrOpen
	}
	return string(plain[w : w+int(n)]), string(plain[w+int(n):]), nil
}

// additional is the data authenticated with an id: its purpose and its
// head (version and key id), so that neither can be changed.
func additional(purpose string, head []byte) []byte {
	return append([]byte(purpose+"\x00"), head...)
}

// MAC signs msg with the current key's signing key.
func (r *Ring) MAC(msg []byte) []byte {
	return mac(r.keys.Load().current.mac, msg)
}

// CheckMAC reports whether sum is msg's MAC under the current or the
// previous key: while a new key file reaches the replicas one by one, a
// replica still signing with the old current key is still heard.
func (r *Ring) CheckMAC(msg, sum []byte) bool {
	ks := r.keys.Load()
	for _, k := range []*key{ks.current, ks.previous} {
		if k != nil && hmac.Equal(mac(k.mac, msg), sum) {
			return true
		}
	}
	return false
}

func mac(k, msg []byte) []byte {
	m := hmac.New(sha256.New, k)
	m.Write(msg)
	return m.Sum(nil)
}
