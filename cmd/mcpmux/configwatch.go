package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/admin"
	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/dirwatch"
	"github.com/mcpmux/mcpmux/internal/fileerr"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/policy"
)

// configWatch puts each new version of the config file in force while
// mcpmux runs: when the file's directory changes (an editor's rename, an
// in-place write, a Kubernetes ConfigMap's symlink swap) and on SIGHUP. A
// version is decoded strictly and validated as a whole first; one with
// problems changes nothing: each problem is logged with its file and line,
// and the config in force stays. The server list is applied live
// (mux.ApplyServers), and so are the keys of liveKeys; every other key
// keeps the value mcpmux started with and is logged as needing a restart.
type configWatch struct {
	path    string
	log     zerolog.Logger
	logOut  *logOutput
	m       *mux.Mux
	metrics *admin.Metrics
	// policies and pins are moved when policy_dir, pin_file or pinning
	// change (policy.Store.Move, pinWatch.Switch).
	policies *policy.Store
	pins     *pinWatch
	// sessionLimits, when set (an HTTP upstream is served), puts a new
	// max_sessions and max_sessions_per_identity in force.
	sessionLimits func(config.Limits)
	// adjust applies to each new version what serve's flags changed of
	// the first (--listen), so that flags are not taken for edits.
	adjust func(*config.Config)

	mu       sync.Mutex // one reload at a time
	running  *config.Config
	last     []byte // the file as last read, applied or refused
	gen      uint64
	lastErr  error
	watching func() // test hook: the directory is watched
}

func newConfigWatch(cfg *config.Config, l *loaded, m *mux.Mux, pins *pinWatch, metrics *admin.Metrics, adjust func(*config.Config)) *configWatch {
	return &configWatch{path: cfg.File, log: l.log.With().Str("component", "config").Logger(), logOut: l.logOut, m: m,
		metrics: metrics, policies: l.policies, pins: pins, adjust: adjust, running: cfg, gen: 1}
}

// Status is the generation in force and the last reload's problems, for
// /readyz.
func (w *configWatch) Status() (uint64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen, w.lastErr
}

// Run watches the config file's directory, and reloads on each value from
// hup, until ctx ends.
func (w *configWatch) Run(ctx context.Context, hup <-chan os.Signal) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				w.reload(ctx, "SIGHUP")
			}
		}
	})
	first := true
	err := dirwatch.Watch(ctx, filepath.Dir(w.path), dirwatch.Options{
		// A save by rename, or a ConfigMap's symlink swap, is whole at its
		// last event; an editor's in-place write is a truncate and a write
		// microseconds apart. 20 ms covers both and keeps a saved server
		// listed within its cold start and 50 ms.
		Settle:   20 * time.Millisecond,
		MaxDelay: 500 * time.Millisecond,
		Rewatch:  time.Second,
		Log:      w.log,
		ErrorMsg: "watching the config file's directory",
		GoneMsg:  "the config file's directory is gone; keeping the config in force until it is back",
		BackMsg:  "the config file's directory is back",
		Watching: w.watching,
	}, func() {
		if first {
			// Watch's first call: what changed before it is compared, not
			// counted as a reload.
			first = false
			w.reload(ctx, "")
			return
		}
		w.reload(ctx, "file changed")
	})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// reload reads the file and puts what changed in force. why is "" for a
// look that is no reload (Watch's first): then an unchanged file counts
// for nothing.
func (w *configWatch) reload(ctx context.Context, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := os.ReadFile(w.path)
	if err == nil && bytes.Equal(data, w.last) {
		if why == "SIGHUP" {
			w.metrics.ConfigReloaded("unchanged")
		}
		return
	}
	var cfg *config.Config
	if err == nil {
		w.last = data
		cfg, err = config.Parse(w.path, data, os.LookupEnv)
	}
	if err != nil {
		w.refuse(err)
		return
	}
	w.adjust(cfg)
	live, restart := changedKeys(w.running, cfg)
	next := inForce(w.running, cfg)
	// The policy directory and the pin file are read before anything
	// changes: one that cannot be read refuses the whole version.
	was := w.running.Mux
	pinsMove := next.Mux.PinFile != was.PinFile || next.Mux.Pinning != was.Pinning || next.Mux.PinNew != was.PinNew
	pinStore := w.pins.Current()
	if pinsMove && next.Mux.PinFile != was.PinFile {
		if pinStore, err = w.pins.open(next.Mux); err != nil {
			w.refuse(err)
			return
		}
	}
	if next.Mux.PolicyDir != was.PolicyDir {
		if err := w.policies.Move(next.Mux.PolicyDir); err != nil {
			w.refuse(err)
			return
		}
	}
	if pinsMove {
		w.pins.Switch(pinStore, next)
	}
	if len(live) > 0 {
		if w.sessionLimits != nil {
			w.sessionLimits(next.Limits)
		}
		w.m.Retune(next)
		// Set once the reload's own lines are out.
		w.logOut.Widen(w.running.Mux, next.Mux)
	}
	changes := w.m.ApplyServers(ctx, cfg.Servers)
	w.lastErr = nil
	if changes.Empty() && len(live) == 0 && len(restart) == 0 {
		if why != "" {
			w.metrics.ConfigReloaded("unchanged")
		}
		return
	}
	w.gen++
	w.metrics.ConfigReloaded("ok")
	w.metrics.Servers(cfg.Servers)
	for _, key := range restart {
		w.log.Warn().Str("file", w.path).Str("key", key).
			Msg("config: this key changed but needs a restart to take effect; the value mcpmux started with stays")
	}
	w.running = next
	w.log.Info().Str("file", w.path).Str("why", why).Uint64("generation", w.gen).Strs("settings", live).
		Strs("added", changes.Added).Strs("removed", changes.Removed).Strs("replaced", changes.Replaced).Strs("reexposed", changes.Reexposed).
		Int("unchanged", len(changes.Unchanged)).Msg("config reloaded")
	w.logOut.Set(next.Mux)
}

// refuse logs the problems of a version of the file that changes nothing.
func (w *configWatch) refuse(err error) {
	w.lastErr = err
	w.metrics.ConfigReloaded("error")
	var es fileerr.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			w.log.Error().Str("file", e.File).Int("line", e.Line).Str("problem", e.Msg).Msg("config: problem in the new version")
		}
		w.lastErr = fmt.Errorf("%s:%d: %s (%d problem(s) in all)", es[0].File, es[0].Line, es[0].Msg, len(es))
	} else {
		w.log.Error().Err(err).Str("file", w.path).Msg("config: cannot read the new version")
	}
	w.log.Error().Str("file", w.path).Msg("config reload refused: the config in force stays")
}

// liveKeys are the keys outside the server list that a reload puts in
// force; every other one needs a restart.
var liveKeys = map[string]bool{
	"mux.call_timeout": true, "mux.page_size": true, "mux.log_level": true, "mux.log_format": true,
	"limits.rate_limit": true, "limits.rate_burst": true,
	"mux.policy_dir": true, "mux.pin_file": true, "mux.pin_new": true, // and mux.pinning, see live
	"mux.catalog": true, "mux.search_above": true,
	// Each server's entry holds these defaults: a change re-exposes it.
	"limits.max_in_flight": true, "limits.max_queued": true,
	"limits.max_sessions": true, "limits.max_sessions_per_identity": true,
}

// live reports whether a reload puts k's new value in force. Pinning
// turned on or off needs a restart: children keep what a pin needs only
// while it is on.
func (k configKey) live() bool {
	if k.name == "mux.pinning" {
		return k.old.String() != config.PinningOff && k.new.String() != config.PinningOff
	}
	return liveKeys[k.name]
}

// configKey is one key outside the server list, in both versions.
type configKey struct {
	name     string // "mux.call_timeout"
	old, new reflect.Value
}

// globalKeys lists the keys of [mux], [upstream], [limits], [telemetry] and
// [replicas] in the order of the config's sections, each in running and in
// next; setting a key's new value sets it in next.
func globalKeys(running, next *config.Config) []configKey {
	var keys []configKey
	for _, sec := range []struct {
		name     string
		old, new any
	}{{"mux", &running.Mux, &next.Mux}, {"upstream", &running.Upstream, &next.Upstream}, {"limits", &running.Limits, &next.Limits},
		// The tracer provider is built once, at start.
		{"telemetry", &running.Telemetry, &next.Telemetry},
		// The replica node (its key file's path, advertised address, peers
		// and peer listener) is built once, at start.
		{"replicas", &running.Replicas, &next.Replicas}} {
		a, b := reflect.ValueOf(sec.old).Elem(), reflect.ValueOf(sec.new).Elem()
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name := sec.name + "." + snake(f.Name)
			if sec.name == "replicas" && f.Name == "Enabled" {
				// No key of the file: the table's presence. Named as the
				// table, so that the log names what was added or removed.
				name = sec.name
			}
			keys = append(keys, configKey{name, a.Field(i), b.Field(i)})
		}
	}
	return keys
}

// changedKeys names the keys outside the server list whose value differs
// between the two versions: those a reload puts in force and those that
// need a restart.
func changedKeys(old, cfg *config.Config) (live, restart []string) {
	for _, k := range globalKeys(old, cfg) {
		switch {
		case reflect.DeepEqual(k.old.Interface(), k.new.Interface()):
		case k.live():
			live = append(live, k.name)
		default:
			restart = append(restart, k.name)
		}
	}
	return live, restart
}

// inForce is what a reload of cfg puts in force: cfg, with each key that
// needs a restart at its value in running.
func inForce(running, cfg *config.Config) *config.Config {
	next := *cfg
	for _, k := range globalKeys(running, &next) {
		if !k.live() {
			k.new.Set(k.old)
		}
	}
	return &next
}

// snake is a Go field name as the config writes its key: CallTimeout is
// call_timeout.
func snake(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
