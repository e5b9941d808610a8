package testsupport

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Lines splits data the way a reader of newline-delimited JSON-RPC reads
// it: each line with its newline, the last one possibly without.
func Lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

// ReadAll reads r to its end in reads of chunk bytes, so that a reader's
// handling of short reads is exercised.
func ReadAll(t testing.TB, r io.Reader, chunk int) []byte {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, chunk)
	for {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			return got.Bytes()
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}
}
