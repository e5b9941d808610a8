package pins

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/mcpmux/mcpmux/internal/dirwatch"
	"github.com/mcpmux/mcpmux/internal/fileerr"
)

// The watch's timings: events settle for 100ms (a burst is read once,
// at most 500ms after its first event), and a watch that failed, or whose
// directory is gone, is tried again every second.
const (
	settleDelay     = 100 * time.Millisecond
	maxDelay        = 500 * time.Millisecond
	rewatchInterval = time.Second
)

// Options are how a Store treats its file.
type Options struct {
	// NoWrite keeps first-sight pins in memory instead of writing them, for
	// commands that only look. Approve writes all the same.
	NoWrite bool
}

// Store holds the pins of one pin file and the pins made on first sight
// that the file could not take. Of the file's pins it keeps only their
// Refs; their fields are read from the file when they are needed (Read,
// and every write, which merges into the file as it is on disk). Current
// takes no lock; everything that changes the pins is serialised by the
// Store.
type Store struct {
	path    string
	log     zerolog.Logger
	noWrite bool

	mu     sync.Mutex // serialises reloads and writes; never taken by Current
	file   *Index     // the last good contents of the file
	sum    Sum        // the SHA-256 of the bytes last read from or written to the file
	onDisk bool       // the file existed when last read, or was written
	mem    []Pin      // pinned on first sight, not in the file (whole: they are to be written)
	broken bool       // the file on disk does not parse or is gone: never overwritten on first sight
	warned bool       // a failed write was logged

	held heldRecord // this process's held record (held.go)

	cur      atomic.Pointer[Index] // file and mem together
	exists   atomic.Bool           // onDisk, as last published
	lastErr  atomic.Pointer[error]
	watching atomic.Bool
	// testHookWatching, if set, is called once Watch watches the directory.
	testHookWatching func()
}

// Open reads the pin file at path. A file that does not exist yet holds no
// pins; one that cannot be read or does not parse is an error naming it
// (and, for each problem, its line), so that mcpmux never starts on fewer
// pins than the file holds.
func Open(path string, log zerolog.Logger, o Options) (*Store, error) {
	s := &Store{path: path, log: log.With().Str("pin_file", path).Logger(), noWrite: o.NoWrite}
	set, sum, exists, err := s.read()
	if err != nil {
		return nil, err
	}
	s.file, s.sum, s.onDisk = set.Index(), sum, exists
	s.publish()
	return s, nil
}

// read reads and parses the file: an absent file holds no pins.
func (s *Store) read() (set *Set, sum Sum, exists bool, err error) {
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return NewSet(), sum, false, nil
	case err != nil:
		return nil, sum, false, fmt.Errorf("pin file: %w", err)
	}
	if set, err = Parse(s.path, data); err != nil {
		return nil, sum, true, err
	}
	return set, sha256.Sum256(data), true, nil
}

// Read returns the pins in force with their fields: the file's, read from
// disk now, and those kept in memory. A pin whose digest differs from the
// one Current has for it was written to the file after the last reload,
// and does not describe the pin in force.
func (s *Store) Read() (*Set, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, _, _, err := s.read()
	if err != nil {
		return nil, err
	}
	return set.With(s.mem), nil
}

// Path is the pin file's path.
func (s *Store) Path() string { return s.path }

// ReadOnly reports whether first-sight pins stay in memory (NoWrite).
func (s *Store) ReadOnly() bool { return s.noWrite }

// Exists reports whether the pin file exists: it did when the Store read
// it, or the Store has written it since. A file deleted later still
// counts (its pins stay in force). It takes no lock.
func (s *Store) Exists() bool { return s.exists.Load() }

// Current returns the pins in force. It takes no lock.
func (s *Store) Current() *Index { return s.cur.Load() }

// LastError is what is wrong with the file on disk now (it does not parse,
// it is gone, a write failed), or nil. While it is not nil the pins in
// force are the last good ones, and first-sight pins stay in memory.
func (s *Store) LastError() error {
	if e := s.lastErr.Load(); e != nil {
		return *e
	}
	return nil
}

// InMemory counts the pins in force that are not in the file.
func (s *Store) InMemory() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mem)
}

func (s *Store) setErr(err error) { s.lastErr.Store(&err) }

// publish makes file and mem current. Called with mu held, or before the
// Store is shared.
func (s *Store) publish() {
	s.cur.Store(s.file.with(s.mem))
	s.exists.Store(s.onDisk)
}

// Pin adds pins made on first sight. It writes them to the file; where the
// file cannot be written (a read-only mount, a file that does not parse, a
// Store opened with NoWrite) they are kept in memory, one warning says so,
// and nothing fails.
func (s *Store) Pin(ps []Pin) {
	if len(ps) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem = append(s.mem, ps...)
	defer s.publish()
	if s.noWrite || s.broken {
		return
	}
	s.flush()
}

// flush writes the pins kept in memory into the file, merged into the
// file as it is on disk if that is the file in force. A file changed since
// it was read is left to its reload, which flushes again.
func (s *Store) flush() {
	unlock, err := lockFile(s.path)
	if err != nil {
		s.flushFailed(err, "pin file cannot be written")
		return
	}
	defer unlock()
	set, sum, exists, err := s.read()
	if err != nil {
		s.flushFailed(err, "pin file cannot be read")
		return
	}
	if exists != s.onDisk || sum != s.sum {
		return // changed since it was read: the pins wait for its reload
	}
	written, err := writeAtomic(s.path, set.With(s.mem))
	if err != nil {
		s.flushFailed(err, "pin file cannot be written")
		return
	}
	s.file, s.sum, s.onDisk, s.mem = s.file.with(s.mem), written, true, nil
	if s.warned {
		s.log.Info().Msg("pin file written again: the pins kept in memory are in it")
		s.warned = false
		s.setErr(nil)
	}
}

// flushFailed logs, once until a write succeeds, that flush could not
// write the pins kept in memory, for what.
func (s *Store) flushFailed(err error, what string) {
	if !s.warned {
		s.log.Warn().Err(err).Int("pins_in_memory", len(s.mem)).
			Msg(what + ": first-sight pins are kept in memory (commit the file another way, e.g. through its ConfigMap)")
		s.warned = true
	}
	s.setErr(err)
}

// lockFile takes an exclusive flock on path+".lock", which every write of
// the pin file (by any mcpmux process: serve's first-sight writes, pins
// approve) holds from reading the file to renaming the new one over it, so
// that no write merges into a file another is replacing and loses its
// update. Where the lock file cannot be created (a read-only directory)
// nothing can be written either: the error says so and no lock is taken.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pin file %s: locking it: %w", path, err)
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("pin file %s: locking it: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing the file lets go of the lock
}

// Approve writes the file with ps pinned (replacing pins of the same kind
// and name) and the pins of drop removed, into the file as it is on disk
// now. Unlike Pin it fails when the file cannot be written, or read: a file
// that does not parse, or is gone after it was read, is not replaced by
// one holding only the approvals.
func (s *Store) Approve(ps []Pin, drop []Pin) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := lockFile(s.path)
	if err != nil {
		return err
	}
	defer unlock()
	set, _, exists, err := s.read()
	if err == nil && s.onDisk && !exists {
		err = fmt.Errorf("pin file %s is gone: approving would write only the approvals", s.path)
	}
	if err != nil {
		return err
	}
	next := set.With(ps, drop...)
	written, err := writeAtomic(s.path, next)
	if err != nil {
		return err
	}
	s.file, s.sum, s.onDisk = next.Index(), written, true
	s.mem = s.notIn(next.With(drop).Index())
	s.broken = false
	s.setErr(nil)
	s.publish()
	return nil
}

// notIn returns the pins of mem that set has none of the same kind and
// name for.
func (s *Store) notIn(set *Index) []Pin {
	var out []Pin
	for _, p := range s.mem {
		if _, ok := set.Get(p.Kind, p.Name); !ok {
			out = append(out, p)
		}
	}
	return out
}

// reload re-reads the file and reports whether the pins in force changed.
// A file that does not parse, or is gone, leaves the last good pins in
// force and is logged (with each problem's line).
func (s *Store) reload() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !s.onDisk:
		return false // never written yet: the first pins will create it
	case errors.Is(err, fs.ErrNotExist):
		if !s.broken {
			s.log.Warn().Msg("pin file is gone: keeping the pins in force; write it again (mcpmux pins approve) to change them")
		}
		s.setErr(fmt.Errorf("pin file %s is gone", s.path))
		s.broken = true
		return false
	case err != nil:
		s.log.Error().Err(err).Msg("pin file cannot be read: keeping the pins in force")
		s.setErr(fmt.Errorf("pin file: %w", err))
		return false
	case sha256.Sum256(data) == s.sum && !s.broken:
		return false
	}
	set, err := Parse(s.path, data)
	if err != nil {
		if es, ok := errors.AsType[fileerr.Errors](err); ok {
			for _, e := range es {
				s.log.Error().Int("line", e.Line).Str("error", e.Msg).Msg("pin file not loaded: keeping the last good pins")
			}
		}
		s.setErr(err)
		s.broken = true
		return false
	}
	s.file, s.sum, s.onDisk = set.Index(), sha256.Sum256(data), true
	s.mem = s.notIn(s.file)
	s.setErr(nil)
	s.broken = false
	s.warned = false
	if len(s.mem) > 0 && !s.noWrite {
		s.flush()
	}
	s.publish()
	s.log.Info().Int("pins", set.Len()).Int("pins_in_memory", len(s.mem)).Msg("pin file reloaded")
	return true
}

// Watch keeps the Store current until ctx is done: the file's directory is
// watched (editors, git checkouts and ConfigMaps replace files by rename),
// and onChange, if not nil, is called after every reload that changed the
// pins in force. Calls are serial, from Watch's goroutine.
//
// Watch returns nil once ctx is done and everything it started has
// stopped, or an error if it could not start watching.
func (s *Store) Watch(ctx context.Context, onChange func()) error {
	if !s.watching.CompareAndSwap(false, true) {
		return errors.New("pins: Watch is already running on this Store")
	}
	defer s.watching.Store(false)
	err := dirwatch.Watch(ctx, filepath.Dir(s.path), dirwatch.Options{
		Settle:   settleDelay,
		MaxDelay: maxDelay,
		Rewatch:  rewatchInterval,
		Log:      s.log,
		ErrorMsg: "watching the pin file's directory",
		GoneMsg:  "the pin file's directory is gone; keeping the pins in force until it is back",
		BackMsg:  "the pin file's directory is back",
		Watching: s.testHookWatching,
	}, func() {
		if s.reload() && onChange != nil {
			onChange()
		}
	})
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	return nil
}

// writeAtomic replaces path with the file holding set: written to a
// temporary file in the same directory, synced, then renamed over path, so
// that a reader (mcpmux watching it) sees the old file or the new one,
// never part of one. It returns the SHA-256 of what it wrote.
func writeAtomic(path string, set *Set) (Sum, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return Sum{}, fmt.Errorf("pin file %s: %w", path, err)
	}
	tmp := f.Name()
	h := sha256.New()
	err = set.write(io.MultiWriter(f, h))
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return Sum{}, fmt.Errorf("pin file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	var sum Sum
	h.Sum(sum[:0])
	return sum, nil
}
