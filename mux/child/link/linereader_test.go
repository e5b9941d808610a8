package link

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// A child's line over the limit costs that line only: mcp-go gets what fit
// and a newline, then an error response of mcpmux's own under the line's id
// when the line is an answer, and nothing when it is not; the lines around
// it go through unchanged, however the reads are sized.
func TestLineReaderLimit(t *testing.T) {
	const limit = 100
	fits := `{"jsonrpc":"2.0","id":1,"result":{"x":"` + strings.Repeat("a", limit-42) + `"}}`
	if len(fits) != limit {
		t.Fatalf("test line is %d bytes", len(fits))
	}
	after := `{"jsonrpc":"2.0","id":2,"result":{}}` + "\n"
	over := func(start string) string { return start + strings.Repeat("b", 300<<10) + "\n" }
	dropped := func(id string) string {
		return `{"error":{"code":-32090,"message":"mcpmux: the answer exceeded max_message_bytes and was dropped"},"id":` + id + `,"jsonrpc":"2.0"}` + "\n"
	}
	cases := []struct {
		name, in, out string
	}{
		{"fits", fits + "\n" + after, fits + "\n" + after},
		{"answer", over(`{"jsonrpc":"2.0","id":"mcpmux-7","result":{"x":"`) + after, "\x00\n" + dropped(`"mcpmux-7"`) + after},
		{"error answer", over(`{"jsonrpc":"2.0","ID":-3,"error":{"message":"`) + after, "\x00\n" + dropped(`-3`) + after},
		{"notification", over(`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`) + after, "\x00\n" + after},
		{"request", over(`{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{"x":"`) + after, "\x00\n" + after},
		{"id after the cut", over(`{"jsonrpc":"2.0","result":{"x":"`) + after, "\x00\n" + after},
		{"one byte over", fits + "c\n" + after, "\x00\n" + dropped(`1`) + after}, // what fit is whole JSON
		{"no end", over(`{"jsonrpc":"2.0","id":5,"result":"`)[:200<<10], "\x00\n" + dropped(`5`)},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 7, 4096} {
			eof := make(chan struct{})
			l := NewLineReader(strings.NewReader(c.in), limit, eof, zerolog.Nop())
			got := testsupport.ReadAll(t, l, chunk)
			// What fit of an oversized line is handed on: a fragment
			// mcp-go cannot parse (even when what fit is whole JSON),
			// ended by what follows.
			want := c.out
			if strings.HasPrefix(c.out, "\x00") {
				want = c.in[:limit] + c.out
			}
			if string(got) != want {
				t.Errorf("%s, reads of %d: got %.400q, want %.400q", c.name, chunk, got, want)
			}
			select {
			case <-eof:
			default:
				t.Errorf("%s: eof not closed at the end of the input", c.name)
			}
		}
	}
}

// endless is a line that never ends.
type endless struct{ left int }

func (e *endless) Read(p []byte) (int, error) {
	if e.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), e.left)
	for i := range p[:n] {
		p[i] = 'x'
	}
	e.left -= n
	return n, nil
}

// Reading a line far over the limit holds none of it beyond the limit: the
// memory allocated stays within the reader's buffers, not the line's size.
func TestLineReaderDropsWithoutHolding(t *testing.T) {
	const line = 256 << 20
	l := NewLineReader(io.MultiReader(strings.NewReader(`{"id":1,"result":"`), &endless{left: line}), 1<<20, make(chan struct{}), zerolog.Nop())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	buf := make([]byte, 4096)
	var handed bytes.Buffer
	for {
		n, err := l.Read(buf)
		if handed.Len() < 2<<20 {
			handed.Write(buf[:n])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("reading a %d MiB line allocated %d MiB", line>>20, grew>>20)
	}
	if !bytes.HasSuffix(handed.Bytes(), []byte(`"id":1,"jsonrpc":"2.0"}`+"\n")) {
		t.Errorf("handed on %.100q...%q, want the error response for id 1 at the end", handed.Bytes(), handed.Bytes()[max(0, handed.Len()-200):])
	}
}
