package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// writes records each write made to it, and tells of it.
type writes struct {
	mu    sync.Mutex
	got   []string
	wrote chan struct{}
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.got = append(w.got, string(p))
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *writes) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

func newWrites() *writes { return &writes{wrote: make(chan struct{}, 1)} }

// Lines are held and written together, in order, by Close; after it, each
// goes through at once.
func TestLogBufferBatchesAndCloseWritesAll(t *testing.T) {
	w := newWrites()
	b := newLogBuffer(w, time.Hour, 1<<20) // neither the timer nor the size writes
	for i := range 100 {
		fmt.Fprintf(b, "line %d\n", i)
	}
	if got := w.all(); len(got) != 0 {
		t.Fatalf("%d writes before Close", len(got))
	}
	b.Close()
	got := w.all()
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if len(got) != 1 || got[0] != want.String() {
		t.Fatalf("Close wrote %d batches: %q", len(got), got)
	}
	fmt.Fprintf(b, "late\n")
	if got := w.all(); len(got) != 2 || got[1] != "late\n" {
		t.Fatalf("after Close: %q", got)
	}
}

// A line is written within the delay with nothing else written after it,
// and a batch that reaches the size at once.
func TestLogBufferWritesWhenIdleAndWhenFull(t *testing.T) {
	w := newWrites()
	b := newLogBuffer(w, time.Millisecond, 64)
	defer b.Close()
	fmt.Fprintf(b, "alone\n")
	select {
	case <-w.wrote:
	case <-time.After(testsupport.Wait):
		t.Fatal("a line alone was never written")
	}
	if got := w.all(); len(got) != 1 || got[0] != "alone\n" {
		t.Fatalf("idle: %q", got)
	}

	w2 := newWrites()
	full := newLogBuffer(w2, time.Hour, 64)
	defer full.Close()
	line := strings.Repeat("x", 40) + "\n"
	fmt.Fprint(full, line)
	fmt.Fprint(full, line) // 82 bytes: over the size
	if got := w2.all(); len(got) != 1 || got[0] != line+line {
		t.Fatalf("full: %q", got)
	}
}

// Lines written at once from many goroutines all arrive whole, each
// writer's in its order, through batches written by size, by the timer and
// by Close.
func TestLogBufferConcurrentWritersKeepLinesWhole(t *testing.T) {
	w := newWrites()
	b := newLogBuffer(w, 50*time.Microsecond, 512)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				fmt.Fprintf(b, "g%d %d\n", g, i)
			}
		})
	}
	wg.Wait()
	b.Close()
	next := make([]int, 8)
	for _, line := range strings.Split(strings.TrimSuffix(strings.Join(w.all(), ""), "\n"), "\n") {
		var g, i int
		if _, err := fmt.Sscanf(line, "g%d %d", &g, &i); err != nil || g < 0 || g >= 8 || i != next[g] {
			t.Fatalf("line %q out of order or torn (next of g%d is %d)", line, g, next[max(0, min(g, 7))])
		}
		next[g]++
	}
	if !slices.Equal(next, []int{500, 500, 500, 500, 500, 500, 500, 500}) {
		t.Fatalf("lines per writer: %v", next)
	}
}
