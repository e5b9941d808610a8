package pins

import (
	"crypto/sha256"
	"encoding/hex"
)

// Sum is a digest: the SHA-256 of a definition's canonical fields.
type Sum [sha256.Size]byte

// String is the digest as the pin file writes it, "sha256:" and hex.
func (s Sum) String() string { return digestPrefix + hex.EncodeToString(s[:]) }

// ParseSum reads a digest written as String writes it.
func ParseSum(s string) (Sum, bool) {
	var sum Sum
	if len(s) != len(digestPrefix)+2*len(sum) || s[:len(digestPrefix)] != digestPrefix {
		return sum, false
	}
	_, err := hex.Decode(sum[:], []byte(s[len(digestPrefix):]))
	return sum, err == nil
}

const digestPrefix = "sha256:"

// Digest returns the digest of def's canonical form, what Canonical's Def
// would give, without keeping the form: for comparing with pins.
func Digest(kind Kind, alias, childName string, def []byte) (Sum, error) {
	return digest(kind, alias, childName, def, true)
}

// PartialDigest is Digest in the first form (CanonicalPartial), for
// comparing with a pin marked v1.
func PartialDigest(kind Kind, alias, childName string, def []byte) (Sum, error) {
	return digest(kind, alias, childName, def, false)
}

func digest(kind Kind, alias, childName string, def []byte, whole bool) (Sum, error) {
	c := getCanon()
	defer c.release()
	if err := c.definition(kind, childName, alias, childName, def, whole); err != nil {
		return Sum{}, err
	}
	return sha256.Sum256(c.out), nil
}

// Sum is the SHA-256 of d's fields as one canonical JSON object. Two
// definitions have the same digest exactly when their canonical fields are
// equal, whatever their key order or whitespace.
func (d Def) Sum() Sum {
	c := getCanon()
	defer c.release()
	c.out = append(c.out, '{')
	for i, f := range d.Fields {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = appendEscaped(c.out, stringBytes(f.Key))
		c.out = append(c.out, ':')
		c.out = append(c.out, f.Value...)
	}
	c.out = append(c.out, '}')
	return sha256.Sum256(c.out)
}

// Digest is d's Sum as the pin file writes it.
func (d Def) Digest() string { return d.Sum().String() }
