package main

import (
	"io"
	"sync"
	"time"
)

// A served mcpmux's log (the audit line of every call among it) is written
// in batches, not a write per line: a line reaches stderr within
// logFlushDelay, or as soon as logFlushBytes are waiting, and everything on
// exit.
const (
	logFlushDelay = 20 * time.Millisecond
	logFlushBytes = 32 << 10
)

// logBuffer holds what is written to it and writes it to w in order, in
// one write per batch: once delay has passed since the first line of the
// batch, once the batch holds size bytes, and on Flush and Close. A write to
// it never waits for w, but for another batch being written when the batch
// is full. A failure to write to w drops the batch: there is nowhere left
// to tell of it.
type logBuffer struct {
	w     io.Writer
	size  int
	delay time.Duration

	mu     sync.Mutex // guards buf, armed and closed; held for a copy, never for w
	buf    []byte
	timer  *time.Timer
	armed  bool
	closed bool

	out sync.Mutex // one batch at a time on w, in order
}

func newLogBuffer(w io.Writer, delay time.Duration, size int) *logBuffer {
	b := &logBuffer{w: w, size: size, delay: delay}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	return b
}

// Write takes p (one log line, as zerolog writes them) into the batch.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.out.Lock()
		b.mu.Unlock()
		defer b.out.Unlock()
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= b.size {
		b.flushLocked()
		return len(p), nil
	}
	if !b.armed {
		b.armed = true
		b.timer.Reset(b.delay)
	}
	b.mu.Unlock()
	return len(p), nil
}

// Flush writes what is held to w before it returns.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	b.flushLocked()
}

// flushLocked writes the batch; it is called with mu held, and releases it
// once the batch is taken, before writing it.
func (b *logBuffer) flushLocked() {
	if b.armed {
		b.armed = false
		b.timer.Stop()
	}
	batch := b.buf
	if len(batch) > 0 {
		b.buf = make([]byte, 0, min(2*len(batch), 2*b.size))
	}
	b.out.Lock() // taken before mu is released: batches go out in order
	b.mu.Unlock()
	defer b.out.Unlock()
	if len(batch) > 0 {
		_, _ = b.w.Write(batch)
	}
}

// Close writes what is held; what is written from now on goes to w at once.
func (b *logBuffer) Close() {
	b.mu.Lock()
	b.closed = true
	b.flushLocked()
}
