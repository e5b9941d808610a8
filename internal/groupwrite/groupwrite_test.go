package groupwrite

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// gate is a stream whose writes each wait for a token on open, recording
// what each write carried.
type gate struct {
	open   chan struct{}
	mu     sync.Mutex
	writes []string
	fail   error
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail != nil {
		return 0, g.fail
	}
	g.writes = append(g.writes, string(p))
	return len(p), nil
}

// waitWriting waits until a write of w is under way.
func waitWriting(w *Writer) {
	for {
		w.mu.Lock()
		writing := w.writing
		w.mu.Unlock()
		if writing {
			return
		}
		runtime.Gosched()
	}
}

// queued waits until w holds n bytes pending.
func queued(w *Writer, n int) {
	for {
		w.mu.Lock()
		got := len(w.pending)
		w.mu.Unlock()
		if got == n {
			return
		}
		runtime.Gosched()
	}
}

// Messages given while a write is under way go out together in the next
// write, each whole; a message given alone is written at once.
func TestMessagesWhileWritingGoOutInOneWrite(t *testing.T) {
	st := &gate{open: make(chan struct{}, 10)}
	w := New(st)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := w.Write([]byte("first\n")); err != nil {
			t.Error(err)
		}
	})
	waitWriting(w)
	msgs := []string{"b\n", "c\n", "d\n"}
	for _, m := range msgs {
		wg.Go(func() {
			if n, err := w.Write([]byte(m)); err != nil || n != len(m) {
				t.Errorf("write %q: %d, %v", m, n, err)
			}
		})
	}
	queued(w, 6)
	// An empty message, given while a write is under way, has nothing to
	// wait for.
	if n, err := w.Write(nil); n != 0 || err != nil {
		t.Fatalf("empty write: %d, %v", n, err)
	}
	st.open <- struct{}{} // the first write
	st.open <- struct{}{} // the batch
	wg.Wait()
	if len(st.writes) != 2 || st.writes[0] != "first\n" {
		t.Fatalf("writes %q, want first\\n then one batch", st.writes)
	}
	got := strings.SplitAfter(st.writes[1], "\n")
	got = got[:len(got)-1]
	slices.Sort(got)
	if !slices.Equal(got, msgs) {
		t.Fatalf("batch %q, want %q in some order", st.writes[1], msgs)
	}

	st.open <- struct{}{}
	if _, err := w.Write([]byte("alone\n")); err != nil || st.writes[2] != "alone\n" {
		t.Fatalf("a lone message: %q, %v", st.writes, err)
	}
}

// Once a write fails, the messages it carried and every later one fail
// with its error.
func TestAFailedWriteFailsTheRest(t *testing.T) {
	broken := errors.New("broken pipe")
	st := &gate{open: make(chan struct{}, 10), fail: broken}
	w := New(st)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := w.Write([]byte("first\n")); !errors.Is(err, broken) {
			t.Errorf("first: %v", err)
		}
	})
	waitWriting(w)
	wg.Go(func() {
		if _, err := w.Write([]byte("queued\n")); !errors.Is(err, broken) {
			t.Errorf("queued: %v", err)
		}
	})
	queued(w, 7)
	st.open <- struct{}{}
	wg.Wait()
	if _, err := w.Write([]byte("later\n")); !errors.Is(err, broken) {
		t.Fatalf("later: %v", err)
	}
	if len(st.writes) != 0 {
		t.Fatalf("written: %q", st.writes)
	}
}
