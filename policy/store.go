package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// Timing of reloads.
const (
	// settleDelay is how long the directory must be quiet before it is
	// re-read, so that a save made of several steps (truncate then write,
	// write a temporary file then rename, Kubernetes' symlink swap) is read
	// once, complete.
	settleDelay = 100 * time.Millisecond
	// maxDelay bounds how long a stream of events can put a reload off, so
	// that a change takes effect within a second even in a busy directory.
	maxDelay = 500 * time.Millisecond
	// rewatchInterval is how often Watch looks for the policy directory
	// while it is gone.
	rewatchInterval = 500 * time.Millisecond
)

// Store holds the current policies of a directory and, while Watch runs,
// keeps them current.
type Store struct {
	dir string
	log zerolog.Logger

	cur     atomic.Pointer[Set]
	lastErr atomic.Pointer[errBox]

	watching atomic.Bool // whether Watch is running

	mu sync.Mutex // serializes reloads

	// onReload, if set, is told the outcome of every reload Watch does.
	onReload func(error)

	// testHookWatching, if set, is called once Watch has started watching
	// the directory, so that tests know later changes will be seen.
	testHookWatching func()
}

// errBox lets an error of any type, or none, live in an atomic.Pointer.
type errBox struct{ err error }

// OnReload has f told the outcome of every reload Watch does: nil when
// every file was read cleanly, else the problems. It must be called before
// Watch; metrics use it.
func (s *Store) OnReload(f func(error)) { s.onReload = f }

// NewStore loads the policies in dir. Problems in individual files are
// logged, with file and line, and reported by LastError; an identity whose
// file has a problem has no access. It is an error for dir not to be a
// readable directory.
func NewStore(dir string, log zerolog.Logger) (*Store, error) {
	s := &Store{dir: dir, log: log}
	if _, _, err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Current returns the current policies. It takes no locks.
func (s *Store) Current() *Set {
	return s.cur.Load()
}

// LastError returns the problems found by the last reload, joined, or nil
// if it read every file cleanly. While a file is broken its identity keeps
// its last good policy, so this is how a health check learns that the
// policies in force are not the ones on disk.
func (s *Store) LastError() error {
	if b := s.lastErr.Load(); b != nil {
		return b.err
	}
	return nil
}

// reload re-reads the directory and, if any identity's policy changed,
// makes the result current. It returns the set that was current before and
// the one current after, which are the same if nothing changed. If the
// directory cannot be read, it keeps the current set and returns the error.
func (s *Store) reload() (old, cur *Set, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	old = s.cur.Load()
	next, problems, err := load(s.dir, old, old.Generation()+1)
	if err != nil {
		s.lastErr.Store(&errBox{err})
		return old, old, err
	}
	var errs []error
	for _, p := range problems {
		s.logProblem(p)
		errs = append(errs, p.err)
	}
	s.lastErr.Store(&errBox{errors.Join(errs...)})

	if old == nil {
		s.cur.Store(next)
		s.log.Info().Str("dir", s.dir).Strs("identities", next.ids()).Msg("policies loaded")
		return old, next, nil
	}
	changed := Changed(old, next)
	if len(changed) == 0 {
		return old, old, nil
	}
	s.cur.Store(next)
	s.log.Info().Str("dir", s.dir).Strs("changed", changed).Uint64("generation", next.gen).Msg("policies reloaded")
	return old, next, nil
}

func (s *Store) logProblem(p problem) {
	msg := "policy file not loaded; its identity has no access"
	if p.kept {
		msg = "policy file not loaded; its identity keeps its last good policy"
	}
	if es, ok := errors.AsType[Errors](p.err); ok {
		for _, e := range es {
			s.log.Error().Str("file", p.file).Int("line", e.Line).Err(e).Msg(msg)
		}
		return
	}
	s.log.Error().Str("file", p.file).Err(p.err).Msg(msg)
}

// Watch keeps the Store current until ctx is done: when anything in the
// directory changes, the directory is re-read once it has been quiet for a
// moment, and a change takes effect within a second.
//
// onChange, if not nil, is called after every reload that changed some
// identity's policy, with the sets before and after; Changed tells which
// identities. Calls are serial, from Watch's goroutine, so a slow onChange
// delays the next reload.
//
// If the directory disappears, the current policies stay in force (and
// LastError reports it) until it is back.
//
// Watch returns nil once ctx is done and everything it started has
// stopped, or an error if it could not start watching. Only one Watch may
// run on a Store at a time.
func (s *Store) Watch(ctx context.Context, onChange func(old, new *Set)) error {
	if !s.watching.CompareAndSwap(false, true) {
		return errors.New("policy: Watch is already running on this Store")
	}
	defer s.watching.Store(false)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("policy: watching %s: %w", s.dir, err)
	}
	defer w.Close() // stops fsnotify's goroutine and waits for it
	// The directory, not each file: editors save by renaming a new file
	// over the old, and Kubernetes swaps the ..data symlink.
	if err := w.Add(s.dir); err != nil {
		return fmt.Errorf("policy: watching %s: %w", s.dir, err)
	}
	if s.testHookWatching != nil {
		s.testHookWatching()
	}
	l := &watchLoop{s: s, w: w, onChange: onChange, dir: filepath.Clean(s.dir)}
	l.run(ctx)
	return nil
}

// watchLoop is the state of one Watch.
type watchLoop struct {
	s        *Store
	w        *fsnotify.Watcher
	onChange func(old, new *Set)
	dir      string // s.dir, cleaned, to recognize events on the directory itself

	reload       *time.Timer
	pendingSince time.Time // first event not yet acted on; zero if none

	rewatch *time.Ticker // non-nil while the directory is not watched
}

func (l *watchLoop) run(ctx context.Context) {
	// Re-read as if there had been an event: the directory may have
	// changed since NewStore or the previous Watch read it, unseen.
	l.reload = time.NewTimer(settleDelay)
	l.pendingSince = time.Now()
	defer l.reload.Stop()
	defer l.stopRewatch()

	for {
		var rewatch <-chan time.Time
		if l.rewatch != nil {
			rewatch = l.rewatch.C
		}
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-l.w.Events:
			if !ok {
				return
			}
			if filepath.Clean(ev.Name) == l.dir && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				l.lost()
			}
			l.schedule()
		case err, ok := <-l.w.Errors:
			if !ok {
				return
			}
			// On overflow, events were dropped; the re-read makes up for
			// them. Other errors may have dropped events too.
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				l.s.log.Error().Err(err).Str("dir", l.s.dir).Msg("watching policy directory")
			}
			l.schedule()
		case <-l.reload.C:
			l.pendingSince = time.Time{}
			l.doReload()
		case <-rewatch:
			if l.s.dirExists() && l.w.Add(l.s.dir) == nil {
				l.stopRewatch()
				l.s.log.Info().Str("dir", l.s.dir).Msg("policy directory is back")
				l.schedule()
			}
		}
	}
}

// schedule arranges a reload once events have stopped for settleDelay, but
// no later than maxDelay after the first of them.
func (l *watchLoop) schedule() {
	now := time.Now()
	if l.pendingSince.IsZero() {
		l.pendingSince = now
	}
	wait := min(settleDelay, l.pendingSince.Add(maxDelay).Sub(now))
	l.reload.Reset(max(wait, 0))
}

func (l *watchLoop) doReload() {
	old, cur, err := l.s.reload()
	if l.s.onReload != nil {
		if err != nil {
			l.s.onReload(err)
		} else {
			l.s.onReload(l.s.LastError())
		}
	}
	if err != nil {
		l.s.log.Error().Err(err).Str("dir", l.s.dir).Msg("policy directory not readable; keeping the current policies")
		if errors.Is(err, fs.ErrNotExist) {
			l.lost()
		}
		return
	}
	if cur != old && l.onChange != nil {
		l.onChange(old, cur)
	}
}

// lost handles the directory being removed or renamed, which ends its
// inotify watch: it watches whatever is at the path now, or else looks for
// the directory every rewatchInterval until it is back.
func (l *watchLoop) lost() {
	if l.rewatch != nil {
		return
	}
	// The watch may be gone already; Remove makes sure, so that Add
	// watches what is at the path now.
	_ = l.w.Remove(l.s.dir)
	if l.s.dirExists() && l.w.Add(l.s.dir) == nil {
		return
	}
	l.s.log.Error().Str("dir", l.s.dir).Msg("policy directory is gone; keeping the current policies until it is back")
	l.rewatch = time.NewTicker(rewatchInterval)
}

func (l *watchLoop) stopRewatch() {
	if l.rewatch != nil {
		l.rewatch.Stop()
		l.rewatch = nil
	}
}

func (s *Store) dirExists() bool {
	fi, err := os.Stat(s.dir)
	return err == nil && fi.IsDir()
}
