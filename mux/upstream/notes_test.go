package upstream

import (
	"errors"
	"fmt"
	"testing"
)

// openStreams returns n open streams of a fresh session, in the order
// they opened.
func openStreams(t *testing.T, n int) (*Session, []*Stream) {
	t.Helper()
	u := &Session{Kind: KindHTTP}
	var out []*Stream
	for range n {
		s := NewStream(func() {})
		if _, ok := u.AddStream(s); !ok {
			t.Fatal("the session has ended")
		}
		s.Begin()
		out = append(out, s)
	}
	return u, out
}

// drainStream drains what s holds, by method.
func drainStream(s *Stream) []string {
	var out []string
	for {
		select {
		case n := <-s.queue:
			out = append(out, n.Method)
		default:
			return out
		}
	}
}

// TestOwnNotesTakeOneStream: with two GET streams open, mcpmux's
// notifications all go to the newest, in the order sent.
func TestOwnNotesTakeOneStream(t *testing.T) {
	u, s := openStreams(t, 2)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprint(i))
		if taken, err := u.Offer(Note{Method: want[i]}); !taken || err != nil {
			t.Fatalf("offer %d: %v, %v", i, taken, err)
		}
	}
	if got := drainStream(s[1]); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the newest stream got %q, want %q", got, want)
	}
	if got := drainStream(s[0]); len(got) > 0 {
		t.Errorf("the older stream got %q", got)
	}
}

// TestOwnNoteAfterFailedWrite: a note whose write fails goes to the
// session's other open stream, not to mcp-go; one whose bytes were written
// but not flushed is sent nowhere again.
func TestOwnNoteAfterFailedWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		other int // notes the other stream gets
	}{
		{"write failed", ErrStreamOver, 1},
		{"flush failed", fmt.Errorf("%w: %w", ErrUnflushed, errors.New("broken pipe")), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := openStreams(t, 2)
			if taken, err := s[1].offer(Note{Method: "n"}); !taken || err != nil {
				t.Fatalf("offer: %v, %v", taken, err)
			}
			var given []Note
			s[1].Run(func([]byte) error { return tc.err }, func(n Note) { given = append(given, n) })
			if len(given) > 0 {
				t.Errorf("given to mcp-go: %v", given)
			}
			if got := drainStream(s[0]); len(got) != tc.other {
				t.Errorf("the other stream got %q, want %d", got, tc.other)
			}
		})
	}
}
