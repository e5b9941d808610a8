package main

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/pins"
)

// pinWatch owns, while serve runs, the pin file in force and the goroutine
// that watches it. A reload that moves pin_file, or changes pinning
// between warn and enforce or pin_new, switches both as one step (Switch).
type pinWatch struct {
	log zerolog.Logger
	m   *mux.Mux

	mu    sync.Mutex
	store *pins.Store // nil: pinning is off
	ctx   context.Context
	stop  context.CancelFunc // ends the watch of store
	wg    sync.WaitGroup     // the watch goroutine
}

// newPinWatch opens the pin file of cfg (none when pinning is off); one
// that does not parse is an error with its lines.
func newPinWatch(log zerolog.Logger, cfg config.Mux) (*pinWatch, error) {
	w := &pinWatch{log: log}
	store, err := w.open(cfg)
	w.store = store
	return w, err
}

// open opens the pin file cfg names, as serve does at its start; nil
// when pinning is off. A file that does not parse is an error with its
// lines, and changes nothing.
func (w *pinWatch) open(cfg config.Mux) (*pins.Store, error) {
	if cfg.Pinning == config.PinningOff {
		return nil, nil
	}
	return pins.Open(cfg.PinFile, w.log.With().Str("component", "pins").Logger(), pins.Options{})
}

// Start watches the pin file in force, and each one Switch puts in
// force, until ctx ends; it changes m's pinning on each switch.
func (w *pinWatch) Start(ctx context.Context, m *mux.Mux) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m, w.ctx = m, ctx
	w.watch()
}

// watch starts the watch of store. Under mu.
func (w *pinWatch) watch() {
	if w.store == nil {
		return
	}
	ctx, stop := context.WithCancel(w.ctx)
	w.stop = stop
	store, m := w.store, w.m
	w.wg.Go(func() {
		if err := store.Watch(ctx, m.PinsChanged); err != nil {
			w.log.Error().Err(err).Msg("pin file watcher stopped")
		}
	})
}

// Switch puts store (nil: pinning off) in force under cfg: the old file's
// watch ends first, and its record of held definitions is removed if the
// file is another.
func (w *pinWatch) Switch(store *pins.Store, cfg *config.Config) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
		w.wg.Wait()
		w.stop = nil
	}
	if w.store != nil && w.store != store {
		w.store.ForgetHeld()
	}
	w.store = store
	w.m.SetPins(cfg, store)
	w.watch()
}

// Current is the pin file in force; nil when pinning is off.
func (w *pinWatch) Current() *pins.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.store
}

// Close waits for the watch to end (its context, Start's, ended) and
// removes the record of held definitions of the file in force.
func (w *pinWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wg.Wait()
	if w.store != nil {
		w.store.ForgetHeld()
	}
}
