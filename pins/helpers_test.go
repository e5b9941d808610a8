package pins

import (
	"bytes"
	"encoding/json"
)

// canonicalJSON returns raw, one JSON value, in canonical form: no
// whitespace, object keys sorted by their UTF-16 code units (as RFC 8785
// does; of a key given twice, the last counts, as encoding/json reads it),
// strings re-escaped minimally, and numbers exactly as written (never
// through float64, so 12345678901234567890 stays as it is, and 1.0 and 1
// differ).
func canonicalJSON(raw []byte) ([]byte, error) {
	if !json.Valid(raw) {
		return nil, invalidJSON(raw)
	}
	c := getCanon()
	defer c.release()
	c.value(raw, skipSpace(raw, 0))
	return bytes.Clone(c.out), nil
}

// encode returns the pin file holding s: stable order, one entry per pin,
// one field per line, so that a change reads as a change of lines in a diff.
func (s *Set) encode() []byte {
	var b bytes.Buffer
	_ = s.write(&b)
	return b.Bytes()
}
