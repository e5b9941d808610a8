package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestAllowedOrigin(t *testing.T) {
	cases := []struct {
		origin, host string
		want         bool
	}{
		{"http://127.0.0.1:7300", "127.0.0.1:7300", true},
		{"http://localhost:3000", "127.0.0.1:7300", true},
		{"http://[::1]:8080", "127.0.0.1:7300", true},
		{"https://mcpmux.example.com", "mcpmux.example.com", true},
		{"https://evil.example.com", "127.0.0.1:7300", false},
		{"https://evil.example.com", "mcpmux.example.com", false},
		{"null", "127.0.0.1:7300", false},
		{"http://127.0.0.1.evil.example.com", "127.0.0.1:7300", false},
	}
	for _, c := range cases {
		if got := allowedOrigin(c.origin, c.host); got != c.want {
			t.Errorf("allowedOrigin(%q, %q) = %v, want %v", c.origin, c.host, got, c.want)
		}
	}
}

// cutReader sends its bytes and then fails as a stalled client's body
// does.
type cutReader struct{ r io.Reader }

func (c cutReader) Read(p []byte) (int, error) {
	if n, err := c.r.Read(p); err != io.EOF {
		return n, err
	}
	return 0, os.ErrDeadlineExceeded
}

// What reading a body allocates follows what the client sent, not what it
// declared, and a body read in chunks decodes as the same bytes whole.
func TestReadChunks(t *testing.T) {
	const declared, sent = 4 << 20, 4 << 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readChunks(cutReader{strings.NewReader(strings.Repeat(" ", sent))}, declared)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a stalled body: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*bodyChunk {
		t.Errorf("%d bytes allocated for a body that declared %d and sent %d", got, declared, sent)
	}

	for _, c := range []struct {
		name string
		body string
	}{
		{"object", testsupport.InitializeBody},
		{"escaped method", strings.Replace(testsupport.InitializeBody, `"initialize"`, `"\u0069nitialize"`, 1)},
		{"duplicate method", `{"method":"ping","method":"initialize","id":1}`},
		{"trailing data", testsupport.InitializeBody + `]`},
		{"two values", testsupport.InitializeBody + testsupport.PingBody},
		{"batch", "[" + testsupport.InitializeBody + "]"},
		{"wrong type", `{"method":7}`},
		{"empty", ``},
	} {
		// Padded so that it spans chunks.
		whole := []byte(c.body + strings.Repeat(" ", 3*bodyChunk))
		for _, length := range []int64{int64(len(whole)), -1} {
			b, err := readChunks(bytes.NewReader(whole), length)
			if err != nil || len(b) < 3 {
				t.Fatalf("%s: %d chunks, %v", c.name, len(b), err)
			}
			var got, want struct {
				Method string `json:"method"`
			}
			errGot, errWant := b.unmarshal(&got), json.Unmarshal(whole, &want)
			if (errGot == nil) != (errWant == nil) || errWant == nil && got != want {
				t.Errorf("%s (length %d): chunks decode to %+v, %v; whole to %+v, %v", c.name, length, got, errGot, want, errWant)
			}
			if r, _ := io.ReadAll(b.reader()); !bytes.Equal(r, whole) {
				t.Errorf("%s (length %d): the chunks read back differ", c.name, length)
			}
		}
	}
}
