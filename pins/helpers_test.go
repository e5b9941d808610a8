package pins

import "bytes"

// encode returns the pin file holding s: stable order, one entry per pin,
// one field per line, so that a change reads as a change of lines in a diff.
func (s *Set) encode() []byte {
	var b bytes.Buffer
	_ = s.write(&b)
	return b.Bytes()
}
