// Package groupwrite owns the coalescing of whole messages that several
// goroutines write to one stream at once (a pipe to a child, say) into as
// few writes of the stream as the stream's own pace allows.
package groupwrite

import (
	"io"
	"sync"
)

// maxKept bounds the buffer a Writer keeps between batches: one large
// message must not pin its size for the life of the stream.
const maxKept = 64 << 10

// Writer writes each message it is given whole, in the order given, and
// returns once that message has been written. A message given while another
// write is under way waits and goes out with every other one that arrived
// meanwhile, in one write: under load the stream sees one write per batch
// rather than one per message; alone, a message is written at once, as it
// would be without the Writer. Once a write fails, every later one fails
// with the same error (the stream is broken).
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	cond    sync.Cond // on mu: a batch was written
	writing bool      // a goroutine is writing; it writes what is pending too
	pending []byte    // the next batch
	spare   []byte    // the last batch's buffer, for the one after
	started uint64    // batches taken from pending
	written uint64    // batches written (or failed)
	err     error
}

// New returns a Writer of whole messages to w.
func New(w io.Writer) *Writer {
	g := &Writer{w: w}
	g.cond.L = &g.mu
	return g
}

// Write writes p, a whole message, as described on Writer. p is not kept
// once Write returns.
func (g *Writer) Write(p []byte) (int, error) { return g.WriteAfter(nil, p) }

// WriteAfter is Write, running before (if not nil) just before p takes its
// place in the stream: a message written once before has returned goes out
// after p. before must not write to g.
func (g *Writer) WriteAfter(before func(), p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return 0, g.err
	}
	if before != nil {
		before()
	}
	if len(p) == 0 {
		return 0, nil // nothing to take a place in the stream
	}
	if g.writing {
		g.pending = append(g.pending, p...)
		batch := g.started + 1 // the next batch taken carries p
		for g.written < batch {
			g.cond.Wait()
		}
		if g.err != nil {
			return 0, g.err
		}
		return len(p), nil
	}
	g.writing = true
	g.mu.Unlock()
	_, err := g.w.Write(p)
	g.mu.Lock()
	if err != nil {
		g.err = err
	}
	g.drain()
	g.writing = false
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// drain writes, one batch at a time, what arrived while the writer wrote;
// under mu, which it lets go for each write.
func (g *Writer) drain() {
	for len(g.pending) > 0 {
		batch := g.pending
		g.pending = g.spare[:0]
		g.started++
		if g.err == nil {
			g.mu.Unlock()
			_, err := g.w.Write(batch)
			g.mu.Lock()
			if err != nil {
				g.err = err
			}
		}
		g.written = g.started
		if cap(batch) <= maxKept {
			g.spare = batch[:0]
		} else {
			g.spare = nil
		}
		g.cond.Broadcast()
	}
}
