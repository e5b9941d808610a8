package auth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Timing of Watch.
const (
	settleDelay     = 100 * time.Millisecond // quiet time before a reload
	maxDelay        = time.Second            // longest a reload waits for quiet
	rewatchInterval = time.Second            // how often to look for a removed directory
)

// Watch keeps the JWT keys current until ctx is done: when anything changes
// in the directory of the JWKS file (which sees editors that rename a new
// file over the old one and Kubernetes swapping its ..data symlink), the
// file is re-read once the directory has been quiet for about 100ms. A file
// that cannot be read or is not a valid JWKS leaves the current keys in
// force and is logged as an error.
//
// Watch returns nil at once when JWT is not configured. Otherwise it returns
// nil once ctx is done and everything it started has stopped, or an error if
// it could not start watching. Only one Watch may run at a time.
func (a *Authenticator) Watch(ctx context.Context) error {
	if a.jwt == nil {
		return nil
	}
	if !a.watching.CompareAndSwap(false, true) {
		return errors.New("auth: Watch is already running")
	}
	defer a.watching.Store(false)

	file := a.jwt.cfg.JWKSFile
	dir := filepath.Dir(file)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("auth: watching %s: %w", dir, err)
	}
	defer w.Close() // stops fsnotify's goroutine and waits for it
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("auth: watching %s: %w", dir, err)
	}
	if a.testHookWatching != nil {
		a.testHookWatching()
	}
	l := &watchLoop{a: a, w: w, file: file, dir: filepath.Clean(dir)}
	l.run(ctx)
	return nil
}

// watchLoop is the state of one Watch.
type watchLoop struct {
	a    *Authenticator
	w    *fsnotify.Watcher
	file string
	dir  string

	reload       *time.Timer
	pendingSince time.Time // first event not yet acted on; zero if none

	rewatch *time.Ticker // non-nil while the directory is not watched
	lastBad []byte       // content of the file last found invalid
}

func (l *watchLoop) run(ctx context.Context) {
	// Re-read as if there had been an event: the file may have changed
	// since New read it.
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
			// Events may have been dropped; the re-read makes up for them.
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				l.a.log.Error().Err(err).Str("dir", l.dir).Msg("watching the JWKS directory")
			}
			l.schedule()
		case <-l.reload.C:
			l.pendingSince = time.Time{}
			l.doReload()
		case <-rewatch:
			if dirExists(l.dir) && l.w.Add(l.dir) == nil {
				l.stopRewatch()
				l.a.log.Info().Str("dir", l.dir).Msg("JWKS directory is back")
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

// doReload re-reads the JWKS file and, if it changed and is valid, puts its
// keys in force. A file that is still the invalid content last reported is
// not reported again.
func (l *watchLoop) doReload() {
	changed, err := l.reloadJWKS()
	if err != nil {
		l.a.log.Error().Err(err).Str("file", l.file).Msg("JWKS file not usable; keeping the current keys")
		if errors.Is(err, fs.ErrNotExist) && !dirExists(l.dir) {
			l.lost()
		}
	}
	if l.a.testHookReload != nil {
		l.a.testHookReload(changed, err)
	}
}

func (l *watchLoop) reloadJWKS() (changed bool, err error) {
	j := l.a.jwt
	data, err := os.ReadFile(l.file)
	if err != nil {
		l.lastBad = nil
		return false, err
	}
	if bytes.Equal(data, j.keys.Load().raw) {
		l.lastBad = nil
		return false, nil
	}
	if l.lastBad != nil && bytes.Equal(data, l.lastBad) {
		return false, nil
	}
	ks, err := parseKeySet(data)
	if err != nil {
		l.lastBad = data
		return false, err
	}
	l.lastBad = nil
	ks.logSkipped(l.a.log, l.file)
	j.keys.Store(ks)
	l.a.log.Info().Str("file", l.file).Int("keys", len(ks.all)).Msg("JWKS reloaded")
	return true, nil
}

// lost handles the directory being removed or renamed, which ends its
// inotify watch: it watches whatever is at the path now, or else looks for
// the directory every rewatchInterval until it is back.
func (l *watchLoop) lost() {
	if l.rewatch != nil {
		return
	}
	_ = l.w.Remove(l.dir)
	if dirExists(l.dir) && l.w.Add(l.dir) == nil {
		return
	}
	l.a.log.Error().Str("dir", l.dir).Msg("JWKS directory is gone; keeping the current keys until it is back")
	l.rewatch = time.NewTicker(rewatchInterval)
}

func (l *watchLoop) stopRewatch() {
	if l.rewatch != nil {
		l.rewatch.Stop()
		l.rewatch = nil
	}
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
