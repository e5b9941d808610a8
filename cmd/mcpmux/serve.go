package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/admin"
	"github.com/mcpmux/mcpmux/auth"
	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/internal/pollstdin"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/policy"
)

// answerGrace is how long calls cut off at the drain deadline have to get
// their answers out before the HTTP servers close their connections.
const answerGrace = 2 * time.Second

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := lookup("serve")
	fs := c.newFlagSet()
	f := defineServe(fs)
	if code, done := c.parse(fs, args, stdout, stderr); done {
		return code
	}
	cfgPath, identity, listen, stdio := f.config, f.identity, f.listen, f.stdio
	// Everything serve writes to stderr goes through one buffer, in order,
	// and is all written before serve returns.
	logs := newLogBuffer(stderr, logFlushDelay, logFlushBytes)
	defer logs.Close()
	stderr = logs
	spawner := startSpawner()
	defer func() {
		if spawner != nil {
			spawner.Close() // after m.Close, deferred later: the children are stopped
		}
	}()
	l, code := load(*cfgPath, stderr, false)
	if l == nil {
		return code
	}
	cfg := l.cfg
	if spawner != nil && !startsProcesses(cfg) {
		spawner.Close()
		spawner = nil
	}
	if *listen != "" {
		cfg.Upstream.Listen = *listen
		if err := cfg.Upstream.CheckListen(); err != nil {
			fmt.Fprintf(stderr, "--listen: %v\n", err)
			return exitBadConfig
		}
	}
	who := cfg.Upstream.Identity
	if *identity != "" {
		if !config.ValidIdentity(*identity) {
			fmt.Fprintf(stderr, "--identity: %q is not a valid identity name\n", *identity)
			return exitRefused
		}
		who = *identity
	}
	serveStdio := cfg.Upstream.Listen == "" || *stdio
	var idWatch *stdioIdentityWatch
	switch {
	case serveStdio && who == "":
		l.log.Warn().Msg("no identity configured for the stdio client: it will see no tools")
	case serveStdio:
		idWatch = &stdioIdentityWatch{log: l.log, dir: l.policies.Dir, identity: who}
		idWatch.start(l.policies.Current())
	}

	metrics := admin.NewMetrics(cfg, func() []string { return l.policies.Current().Identities() })
	l.policies.OnReload(metrics.PolicyReloaded)
	opts := muxOptions(l.log)
	opts.Observer = metrics
	opts.Spawner = spawner
	pinWatch, perr := newPinWatch(l.log, cfg.Mux)
	if perr != nil {
		report(stderr, perr)
		return exitBadConfig
	}
	opts.Pins = pinWatch.Current()
	tracing, terr := telemetry.Start(context.Background(), cfg.Telemetry, os.LookupEnv, mux.Version)
	if terr != nil {
		fmt.Fprintf(stderr, "[telemetry]: %v\n", terr)
		return exitBadConfig
	}
	if tracing != nil {
		l.log.Info().Str("endpoint", tracing.Endpoint).Str("protocol", tracing.Protocol).Msg("tracing on: spans go by OTLP")
		// Deferred before m.Close, so run after it: the last calls' spans
		// are ended, then flushed.
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tracing.Shutdown(ctx); err != nil {
				l.log.Warn().Err(err).Msg("spans not flushed")
			}
		}()
	}
	opts.Tracing = tracing
	node, nerr := newReplicaNode(cfg, l.log, &opts)
	if nerr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", shown(cfg.File), nerr)
		return exitBadConfig
	}
	m := mux.New(cfg, l.policies, opts)
	metrics.Pins(m.PinStatus)
	var (
		authn *auth.Authenticator
		err   error
	)
	if cfg.Upstream.Listen != "" {
		authn, err = auth.New(cfg.Upstream, l.log.With().Str("component", "auth").Logger())
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", shown(cfg.File), err)
			return exitBadConfig
		}
	}
	cw := newConfigWatch(cfg, l, m, pinWatch, metrics, func(next *config.Config) {
		if *listen != "" {
			next.Upstream.Listen = *listen
		}
	})
	sources := admin.Sources{
		Metrics: metrics,
		Status:  m.Status,
		Policy: func() (uint64, error) {
			return l.policies.Current().Generation(), l.policies.LastError()
		},
		Config: cw.Status,
	}
	if authn != nil {
		sources.Keys = authn.KeysStatus
	}
	if opts.Pins != nil {
		sources.Pins = m.PinStatus
	}
	var draining atomic.Bool // /readyz says 503 from the first signal on
	sources.Draining = draining.Load
	adminHandler := admin.Handler(sources)

	// stdio is served until stdioCtx ends, after the drain.
	stdioCtx, endStdio := context.WithCancel(context.Background())
	defer endStdio()

	var (
		servers   []*http.Server
		listeners []net.Listener
		upstream  *edge.HTTPUpstream
		adminSrv  *http.Server // closed last: /readyz tells of the drain
		peerSrv   *http.Server // keeps no connection from the first signal on
	)
	addServer := func(addr string, h http.Handler) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		listeners = append(listeners, ln)
		servers = append(servers, newHTTPServer(h, cfg.Limits, l.log))
		return nil
	}
	closeListeners := func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}
	if cfg.Upstream.Listen != "" {
		upstream = m.NewHTTPUpstream(edge.HTTPOptions{
			Path:               cfg.Upstream.Path,
			SessionIdleTimeout: cfg.Upstream.SessionIdleTimeout,
			Limits:             cfg.Limits,
		})
		cw.sessionLimits = upstream.SetSessionLimits
		root := http.NewServeMux()
		var public http.Handler = upstream
		if node != nil {
			public = node.Public(upstream)
		}
		root.Handle(cfg.Upstream.Path, authn.Middleware(public, mux.WithCaller))
		if path, h := authn.MetadataHandler(); h != nil {
			root.Handle(path, h)
		}
		switch {
		case cfg.Upstream.AdminListen != "":
		case loopbackListen(cfg.Upstream.Listen):
			mountAdmin(root, adminHandler, admin.HealthPath, admin.ReadyPath, admin.MetricsPath)
		default:
			// Agents reach this listener; what /readyz and /metrics tell is
			// for probes and scrapers, on admin_listen.
			mountAdmin(root, adminHandler, admin.HealthPath)
			l.log.Warn().Str("listen", cfg.Upstream.Listen).Msg("/readyz and /metrics are served only on admin_listen, which is not set, since listen is not a loopback address")
		}
		if err := addServer(cfg.Upstream.Listen, root); err != nil {
			upstream.Shutdown(context.Background())
			fmt.Fprintf(stderr, "listen: %v\n", err)
			return 1
		}
		if node != nil {
			if err := addServer(cfg.Replicas.Listen, peerHandler(node, cfg.Upstream.Path, authn.Middleware(upstream, mux.WithCaller))); err != nil {
				closeListeners()
				upstream.Shutdown(context.Background())
				fmt.Fprintf(stderr, "[replicas] listen: %v\n", err)
				return 1
			}
			peerSrv = servers[len(servers)-1]
		}
	}
	if cfg.Upstream.AdminListen != "" {
		root := http.NewServeMux()
		mountAdmin(root, adminHandler, admin.HealthPath, admin.ReadyPath, admin.MetricsPath)
		err := addServer(cfg.Upstream.AdminListen, root)
		if err == nil {
			adminSrv = servers[len(servers)-1]
		}
		if err != nil {
			closeListeners()
			if upstream != nil {
				upstream.Shutdown(context.Background())
			}
			fmt.Fprintf(stderr, "admin_listen: %v\n", err)
			return 1
		}
	}
	if addr := cfg.Upstream.DebugListen; addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeListeners()
			if upstream != nil {
				upstream.Shutdown(context.Background())
			}
			fmt.Fprintf(stderr, "debug_listen: %v\n", err)
			return 1
		}
		listeners = append(listeners, ln)
		// No write timeout: a CPU profile answers only after its seconds.
		servers = append(servers, &http.Server{Handler: profiles(), ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout,
			ErrorLog: httpErrorLog(l.log)})
	}

	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	// The first signal starts the shutdown, or joins the one stdin's end
	// started, which it must not cut short: children would be left to the
	// supervisor rather than stopped. A second one ends mcpmux at once.
	defer context.AfterFunc(sigCtx, stopSignals)()
	// After m.Close (deferred below, so run before it): nothing records
	// any more.
	defer pinWatch.Close()
	m.Start(context.Background())
	defer m.Close()

	// Watchers and servers; each returns once stopped, and is waited for.
	var bg sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer func() { stopWatch(); bg.Wait() }()
	bg.Go(func() {
		changed := m.PolicyChanged
		if idWatch != nil {
			changed = func(old, cur *policy.Set) {
				m.PolicyChanged(old, cur)
				idWatch.changed(old, cur)
			}
		}
		if err := l.policies.Watch(watchCtx, changed); err != nil {
			l.log.Error().Err(err).Msg("policy watcher stopped")
		}
	})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	bg.Go(func() {
		if err := cw.Run(watchCtx, hup); err != nil {
			l.log.Error().Err(err).Msg("config watcher stopped")
		}
	})
	pinWatch.Start(watchCtx, m)
	if node != nil {
		bg.Go(func() { node.Run(watchCtx, nil) })
	}
	if authn != nil {
		bg.Go(func() {
			if err := authn.Watch(watchCtx); err != nil {
				l.log.Error().Err(err).Msg("JWKS watcher stopped")
			}
		})
	}
	for i, srv := range servers {
		ln := listeners[i]
		l.log.Info().Str("addr", ln.Addr().String()).Msg("serving HTTP")
		bg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				l.log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("HTTP server failed")
			}
		})
	}

	stdioDone := make(chan error, 1)
	if serveStdio {
		l.log.Info().Str("identity", who).Int("servers", len(cfg.Servers)).Str("version", mux.Version).Msg("mcpmux serving on stdio")
		bg.Go(func() {
			in := stdin
			if f, ok := stdin.(*os.File); ok {
				polled, restore := pollstdin.Of(f)
				defer restore()
				in = polled
			}
			stdioDone <- m.ServeStdio(stdioCtx, who, in, stdout)
		})
	}

	status := exitOK
	select {
	case <-sigCtx.Done():
		l.log.Info().Msg("signal received; stopping")
	case err := <-stdioDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			l.log.Error().Err(err).Msg("stdio server failed; stopping")
			status = 1
		} else {
			l.log.Info().Msg("stdin closed; stopping")
		}
	}
	draining.Store(true)
	if peerSrv != nil {
		// Replicas forward here over connections they keep: closed now,
		// while the listener still takes new ones, a request written on
		// one as it closes is sent again on a new one, served as before.
		// Closed at the drain, with the listener, it would answer 502.
		peerSrv.SetKeepAlivesEnabled(false)
	}
	if d := cfg.Upstream.DrainDelay; d > 0 {
		// Serving as before while the load balancer sees /readyz say 503.
		l.log.Info().Dur("drain_delay", d).Msg("not ready; serving until the drain delay is over")
		time.Sleep(d)
	}
	drain(l, cfg.Upstream.DrainTimeout, m, upstream, servers, adminSrv)
	endStdio()
	return status
}

// startSpawner returns the Spawner of serve's children with its
// supervisor already starting, so that the supervisor initialises while the
// config is read instead of when the first child is started; nil when
// mcpmux cannot find its own binary (muxOptions then warns, once the log
// exists).
func startSpawner() *childproc.Spawner {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	s := childproc.NewSpawner(self)
	s.Prestart()
	return s
}

// startsProcesses reports whether any server of cfg is a command to run.
func startsProcesses(cfg *config.Config) bool {
	for _, s := range cfg.Servers {
		if s.URL == "" {
			return true
		}
	}
	return false
}

// drain stops mcpmux's upstreams: no new HTTP connections or requests are
// taken, calls in flight may finish within timeout, those still running
// then are cut off (and answered so), and the HTTP servers close, the
// admin server (last, if not nil) only then, so that /readyz answers 503
// throughout.
func drain(l *loaded, timeout time.Duration, m *mux.Mux, upstream *edge.HTTPUpstream, servers []*http.Server, last *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if upstream != nil {
		upstream.Shutdown(ctx)
	}
	var shut sync.WaitGroup
	for _, srv := range servers {
		if srv != last {
			shut.Go(func() { _ = srv.Shutdown(ctx) })
		}
	}
	if err := m.WaitIdle(ctx); err != nil {
		l.log.Warn().Dur("drain_timeout", timeout).Msg("calls still running at the drain deadline are cut off")
	}
	m.CutCalls(pipeline.ErrShuttingDown)
	// Give the answers of cut-off calls a moment to go out, then close.
	grace, cancelGrace := context.WithTimeout(context.Background(), answerGrace)
	defer cancelGrace()
	for _, srv := range servers {
		shut.Go(func() {
			if srv.Shutdown(grace) != nil {
				_ = srv.Close()
			}
		})
	}
	shut.Wait()
}

// profiles serves Go's runtime profiles under /debug/pprof/, for
// debug_listen only.
func profiles() http.Handler {
	h := http.NewServeMux()
	h.HandleFunc("/debug/pprof/", pprof.Index)
	h.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	h.HandleFunc("/debug/pprof/profile", pprof.Profile)
	h.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	h.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return h
}

func mountAdmin(root *http.ServeMux, h http.Handler, paths ...string) {
	for _, p := range paths {
		root.Handle(p, h)
	}
}

// loopbackListen reports whether a listen address is on the loopback
// interface only (localhost, 127.0.0.0/8, ::1).
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// newHTTPServer builds an HTTP server bounded by limits. It sets no
// ReadTimeout or WriteTimeout: either would end streams and long calls
// (the body's read and each write are bounded per request instead, by the
// MCP upstream and by boundWrites).
func newHTTPServer(h http.Handler, limits config.Limits, log zerolog.Logger) *http.Server {
	return &http.Server{
		Handler:           boundWrites(h, limits.WriteTimeout),
		ReadHeaderTimeout: limits.ReadHeaderTimeout,
		IdleTimeout:       limits.IdleTimeout,
		MaxHeaderBytes:    limits.MaxHeaderBytes,
		ErrorLog:          httpErrorLog(log),
	}
}

// httpErrorLog is where net/http's servers write what goes wrong on a
// connection (a failed accept, a handler's panic, a malformed request): a
// warning in mcpmux's log.
func httpErrorLog(log zerolog.Logger) *stdlog.Logger {
	return liblog.Std(log.With().Str("component", "http-server").Logger(), slog.LevelWarn)
}

// boundWrites gives every request on a connection a fresh write deadline,
// so that a short answer (a 401, /healthz) cannot block on a client that
// does not read, and so that a deadline left by an earlier request on the
// connection does not cut a later one. The MCP upstream extends it before
// each of its own writes.
func boundWrites(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}
