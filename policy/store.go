package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/dirwatch"
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
	dir string // guarded by mu; Move changes it
	log zerolog.Logger

	cur     atomic.Pointer[Set]
	lastErr atomic.Pointer[errBox]

	watching atomic.Bool // whether Watch is running

	mu sync.Mutex // serializes reloads

	// servers, once set by WarnUnmatchable, is what patterns are checked
	// against, so that reloads can warn about patterns that match nothing.
	// Guarded by mu.
	servers *Servers

	// onReload, if set, is told the outcome of every reload Watch does.
	onReload func(error)

	// notify serialises the publishing of sets with the telling of them
	// (Watch's onChange), so that a Move and a reload of Watch's are told
	// in the order they were made. Taken before mu.
	notify   sync.Mutex
	onChange func(old, new *Set) // Watch's, while it runs; guarded by notify
	// rewatch, while Watch runs, has it watch dir anew; guarded by mu.
	rewatch context.CancelFunc

	// testHookWatching, if set, is called once Watch has started watching
	// the directory, so that tests know later changes will be seen.
	testHookWatching func()
}

// WarnUnmatchable logs a warning for every pattern of the current policies
// that can never match (see Policy.Unmatchable), and has every later reload
// warn about the policies it changes.
func (s *Store) WarnUnmatchable(servers Servers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	servers.Aliases = slices.Clone(servers.Aliases)
	s.servers = &servers
	for _, w := range s.cur.Load().Unmatchable(servers) {
		s.logWarning(w)
	}
}

func (s *Store) logWarning(w Warning) {
	s.log.Warn().Str("file", w.File).Int("line", w.Line).Msg(w.Msg)
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

// Dir is the directory the policies in force are read from.
func (s *Store) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// Move puts the policies of dir in force in place of those of the
// directory read until now, as one step, and has Watch watch dir from
// then on. If dir cannot be read nothing changes and the error says why;
// problems in its files are as for any reload (logged, reported by
// LastError; the identity keeps the policy it had, or has no access). A
// running Watch's onChange is told, as for one of its own reloads.
func (s *Store) Move(dir string) error {
	s.notify.Lock()
	defer s.notify.Unlock()
	s.mu.Lock()
	old := s.cur.Load()
	next, problems, err := load(dir, old, old.Generation()+1)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("policy_dir %s: %w", dir, err)
	}
	from := s.dir
	s.dir = dir
	s.lastErr.Store(&errBox{s.logProblems(problems)})
	s.cur.Store(next)
	if s.rewatch != nil {
		s.rewatch()
	}
	s.mu.Unlock()
	s.log.Info().Str("dir", dir).Str("from", from).Strs("identities", next.ids()).Strs("changed", Changed(old, next)).
		Uint64("generation", next.gen).Msg("policies moved")
	if s.onChange != nil {
		s.onChange(old, next)
	}
	return nil
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

// reload re-reads the directory and, if any identity's policy changed (or
// only its rules moved to other lines, which the audit log names), makes the
// result current. It returns the set that was current before and
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
	s.lastErr.Store(&errBox{s.logProblems(problems)})

	if old == nil {
		s.cur.Store(next)
		s.log.Info().Str("dir", s.dir).Strs("identities", next.ids()).Msg("policies loaded")
		return old, next, nil
	}
	changed := Changed(old, next)
	if len(changed) == 0 && !moved(old, next) {
		return old, old, nil
	}
	// Warned about before they are published, so that whoever sees the
	// new policies can find their warnings logged (the tests rely on it).
	if s.servers != nil {
		for _, id := range changed {
			for _, w := range next.For(id).Unmatchable(*s.servers) {
				s.logWarning(w)
			}
		}
	}
	s.cur.Store(next)
	s.log.Info().Str("dir", s.dir).Strs("changed", changed).Uint64("generation", next.gen).Msg("policies reloaded")
	return old, next, nil
}

// moved reports whether some policy of next was not taken from old: the
// same access, its rules written on other lines.
func moved(old, next *Set) bool {
	for _, id := range next.ids() {
		if next.For(id) != old.For(id) {
			return true
		}
	}
	return false
}

// logProblems logs each of problems and returns them joined.
func (s *Store) logProblems(problems []problem) error {
	var errs []error
	for _, p := range problems {
		s.logProblem(p)
		errs = append(errs, p.err)
	}
	return errors.Join(errs...)
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
// onChange, if not nil, is called after every reload that published a set,
// with the sets before and after; Changed tells which identities' access
// changed (none, when rules only moved to other lines). Calls are serial, from Watch's goroutine, so a slow onChange
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
	s.notify.Lock()
	s.onChange = onChange
	s.notify.Unlock()
	defer func() {
		s.notify.Lock()
		s.onChange = nil
		s.notify.Unlock()
	}()

	for {
		// Each directory is watched until Move names another.
		s.mu.Lock()
		dir := s.dir
		wctx, rewatch := context.WithCancel(ctx)
		s.rewatch = rewatch
		s.mu.Unlock()
		err := dirwatch.Watch(wctx, dir, dirwatch.Options{
			Settle:   settleDelay,
			MaxDelay: maxDelay,
			Rewatch:  rewatchInterval,
			Log:      s.log,
			ErrorMsg: "watching policy directory",
			GoneMsg:  "policy directory is gone; keeping the current policies until it is back",
			BackMsg:  "policy directory is back",
			Watching: s.testHookWatching,
		}, func() { s.watchReload(onChange) })
		s.mu.Lock()
		s.rewatch = nil
		s.mu.Unlock()
		rewatch()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("policy: %w", err)
		}
	}
}

// watchReload is one reload done by Watch.
func (s *Store) watchReload(onChange func(old, new *Set)) {
	s.notify.Lock()
	defer s.notify.Unlock()
	old, cur, err := s.reload()
	if s.onReload != nil {
		if err != nil {
			s.onReload(err)
		} else {
			s.onReload(s.LastError())
		}
	}
	if err != nil {
		// If the directory is gone, dirwatch notices and waits for it.
		s.log.Error().Err(err).Str("dir", s.Dir()).Msg("policy directory not readable; keeping the current policies")
		return
	}
	if cur != old && onChange != nil {
		onChange(old, cur)
	}
}
