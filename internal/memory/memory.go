// Package memory keeps mcpmux's resident memory near what it holds: the
// collector runs more often while catalogs are read, and freed pages go
// back to the kernel once they are published.
package memory

import (
	"runtime/debug"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/internal/childproc"
)

// Return hands the heap's free pages back to the kernel, and the
// pages of code and read-only data that starting and reading catalogs
// touched. Reading a child's catalog leaves garbage several times the
// catalog's size (the child's pages, the decoded lists, the schemas
// compiled to vet them), and at the collector's own pace its pages would
// stay resident until the next collection, which an idle mcpmux has only
// every two minutes. It costs one whole collection and a read of smaps,
// so it is asked for through a Returner once a catalog is published,
// never before, and once for all the children's first starts.
func Return() {
	debug.FreeOSMemory()
	childproc.DropFilePages()
}

// DropStartPages hands back to the kernel the pages of code and read-only
// data that starting the process touched (every package's initialisation,
// reading the config), before the children's catalogs are read. Otherwise
// they are still resident when reading and publishing the catalogs brings
// the heap to its peak, and mcpmux's peak RSS is the sum of both; what is
// still used is mapped again from the page cache. Only the file pages: the
// heap holds next to nothing yet.
func DropStartPages() { childproc.DropFilePages() }

// catalogGCPercent is the collector's GOGC while a child's catalog is
// read and built, and while the first catalog is merged and published. Reading one leaves garbage several times the catalog's
// size, which at GOGC 100 is let grow to as much again as the heap in use
// before it is collected: the process's peak RSS. Collecting more often
// for the moment of the read costs CPU at start-up and on re-reads only.
const catalogGCPercent = 25

// catalogGC counts the catalog reads under way, which share one lowered
// GOGC; saved is the one to restore when the last ends.
var catalogGC struct {
	mu    sync.Mutex
	reads int
	saved int
}

// TightGC lowers GOGC to catalogGCPercent, unless it is lower already (or
// off), until the returned function is called.
func TightGC() (restore func()) {
	catalogGC.mu.Lock()
	if catalogGC.reads == 0 {
		catalogGC.saved = debug.SetGCPercent(catalogGCPercent)
		if catalogGC.saved < catalogGCPercent {
			debug.SetGCPercent(catalogGC.saved)
		}
	}
	catalogGC.reads++
	catalogGC.mu.Unlock()
	return sync.OnceFunc(func() {
		catalogGC.mu.Lock()
		defer catalogGC.mu.Unlock()
		if catalogGC.reads--; catalogGC.reads == 0 {
			debug.SetGCPercent(catalogGC.saved)
		}
	})
}

// ReturnEvery is how often memory is returned at most: a child that
// re-reads its catalog on every list_changed, or restarts in a loop, would
// otherwise have mcpmux collect its whole heap each time.
const ReturnEvery = 2 * time.Second

// Returner runs a func (Return) on a goroutine of its own when asked, at
// most once per every: what is asked while it runs or waits out
// every is served by one run after the wait, so the last request is always
// served. The goroutine lives only while there is something to do or wait
// for; Close stops it and waits.
type Returner struct {
	run   func()
	every time.Duration
	stop  chan struct{}

	mu      sync.Mutex
	pending bool // asked since the last run began
	busy    bool // the goroutine runs
	closed  bool
	wg      sync.WaitGroup
}

// NewReturner returns a Returner of run, at most once per every.
func NewReturner(run func(), every time.Duration) *Returner {
	return &Returner{run: run, every: every, stop: make(chan struct{})}
}

// Request asks for a run; it never blocks.
func (r *Returner) Request() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.pending = true
	if !r.busy {
		r.busy = true
		r.wg.Go(r.loop)
	}
}

func (r *Returner) loop() {
	for {
		r.mu.Lock()
		if !r.pending || r.closed {
			r.busy = false
			r.mu.Unlock()
			return
		}
		r.pending = false
		r.mu.Unlock()
		r.run()
		t := time.NewTimer(r.every)
		select {
		case <-t.C:
		case <-r.stop:
			t.Stop()
		}
	}
}

// Close stops the goroutine, dropping a request it has not served, and
// waits for it; requests after Close are ignored.
func (r *Returner) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.stop)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
