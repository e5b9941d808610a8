// Package dirwatch tells when a directory's contents have settled after a
// change.
package dirwatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// Options are the timings, logging and test hook of a Watch.
type Options struct {
	// Settle is how long the directory must be quiet before reload is
	// called, so that a save made of several steps (truncate then write,
	// write a temporary file then rename, Kubernetes' symlink swap) is
	// read once, complete.
	Settle time.Duration
	// MaxDelay bounds how long a stream of events can put a reload off
	// after the first of them.
	MaxDelay time.Duration
	// Rewatch is how often Watch looks for the directory while it is gone.
	Rewatch time.Duration

	// Log receives the messages below, each with the directory as "dir".
	Log zerolog.Logger
	// ErrorMsg is logged as an error, with the error, when watching
	// reports one (other than dropped events, which reload makes up for).
	ErrorMsg string
	// GoneMsg is logged as an error when the directory is gone.
	GoneMsg string
	// BackMsg is logged as info when the directory is back.
	BackMsg string

	// Watching, if set, is called once the directory is watched, so that
	// tests know later changes will be seen.
	Watching func()
}

// Watch watches dir until ctx is done. It calls reload once Settle after it
// starts (the directory may have changed unseen before), and again after
// every burst of changes has settled: once the directory has been quiet for
// Settle, but no later than MaxDelay after the first change. Calls are
// serial, from the goroutine that called Watch, so a slow reload delays
// the next.
//
// The directory, not each file, is watched: editors save by renaming a new
// file over the old, and Kubernetes swaps the ..data symlink. When the
// directory is removed or renamed away, Watch watches whatever is at the
// path now or, if nothing is, looks for it every Rewatch and, once it is
// back, watches it and calls reload.
//
// Watch returns nil once ctx is done and everything it started has
// stopped, or an error if it could not start watching.
func Watch(ctx context.Context, dir string, o Options, reload func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	defer w.Close() // stops fsnotify's goroutine and waits for it
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watching %s: %w", dir, err)
	}
	if o.Watching != nil {
		o.Watching()
	}
	l := &loop{o: o, w: w, dir: dir, clean: filepath.Clean(dir), reload: reload}
	l.run(ctx)
	return nil
}

// loop is the state of one Watch.
type loop struct {
	o      Options
	w      *fsnotify.Watcher
	dir    string
	clean  string // dir, cleaned, to recognize events on the directory itself
	reload func()

	timer        *time.Timer // fires when reload is due
	pendingSince time.Time   // first event not yet acted on; zero if none

	rewatch *time.Ticker // non-nil while the directory is not watched
}

func (l *loop) run(ctx context.Context) {
	// Reload as if there had been an event.
	l.timer = time.NewTimer(l.o.Settle)
	l.pendingSince = time.Now()
	defer l.timer.Stop()
	defer l.stopRewatch()
	// inotify does not always report the watched directory itself going
	// away (the event can be lost behind the ones for its files), so its
	// existence is also checked every Rewatch.
	check := time.NewTicker(l.o.Rewatch)
	defer check.Stop()

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
			if filepath.Clean(ev.Name) == l.clean && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				l.lost()
			}
			l.schedule()
		case err, ok := <-l.w.Errors:
			if !ok {
				return
			}
			// On overflow, events were dropped; the reload makes up for
			// them. Other errors may have dropped events too.
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				l.o.Log.Error().Err(err).Str("dir", l.dir).Msg(l.o.ErrorMsg)
			}
			l.schedule()
		case <-l.timer.C:
			l.pendingSince = time.Time{}
			l.reload()
			// A reload may be the first to see the directory gone, if
			// the event that said so was dropped; it may also have read the
			// directory a moment before it went, so one more reload tells
			// the callback.
			if l.rewatch == nil && !dirExists(l.dir) {
				l.lost()
				l.schedule()
			}
		case <-check.C:
			if l.rewatch == nil && !dirExists(l.dir) {
				l.lost()
				l.schedule()
			}
		case <-rewatch:
			if dirExists(l.dir) && l.w.Add(l.dir) == nil {
				l.stopRewatch()
				l.o.Log.Info().Str("dir", l.dir).Msg(l.o.BackMsg)
				l.schedule()
			}
		}
	}
}

// schedule arranges a reload once events have stopped for Settle, but no
// later than MaxDelay after the first of them.
func (l *loop) schedule() {
	now := time.Now()
	if l.pendingSince.IsZero() {
		l.pendingSince = now
	}
	wait := min(l.o.Settle, l.pendingSince.Add(l.o.MaxDelay).Sub(now))
	l.timer.Reset(max(wait, 0))
}

// lost handles the directory being removed or renamed, which ends its
// inotify watch: it watches whatever is at the path now, or else looks for
// the directory every Rewatch until it is back.
func (l *loop) lost() {
	if l.rewatch != nil {
		return
	}
	// The watch may be gone already; Remove makes sure, so that Add
	// watches what is at the path now.
	_ = l.w.Remove(l.dir)
	if dirExists(l.dir) && l.w.Add(l.dir) == nil {
		return
	}
	l.o.Log.Error().Str("dir", l.dir).Msg(l.o.GoneMsg)
	l.rewatch = time.NewTicker(l.o.Rewatch)
}

func (l *loop) stopRewatch() {
	if l.rewatch != nil {
		l.rewatch.Stop()
		l.rewatch = nil
	}
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
