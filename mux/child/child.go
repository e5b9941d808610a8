package child

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/internal/memory"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child/link"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// childProtocolVersion is what mcpmux speaks to children. The 2026-07-28
// revision has no initialize; pinning the last one that does makes every
// restart a real, fresh handshake.
const childProtocolVersion = "2025-11-25"

// Restart backoff: the first restart comes quickly, later ones slow down to
// at most maxBackoff; a child that stayed up for healthyUptime starts over.
const (
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 30 * time.Second
	healthyUptime = 10 * time.Second
	// minRereadGap is the least time between two re-reads of a child's
	// catalog: a flood of tools/list_changed costs at most one re-read per
	// gap, and the last change is still read.
	minRereadGap = 250 * time.Millisecond
	// drainGrace is how long an exited child's stdout may still be read for
	// answers it wrote just before exiting.
	drainGrace = time.Second
)

// Phase is where a child is in its life.
type Phase string

const (
	PhaseStarting   Phase = "starting"
	PhaseReady      Phase = "ready"
	PhaseRestarting Phase = "restarting"
	PhaseDown       Phase = "down"
	PhaseStopped    Phase = "stopped"
)

// ErrUnavailable is wrapped by errors for calls whose child was not ready in
// time.
var ErrUnavailable = errors.New("unavailable")

// Server supervises one child server. Its run goroutine is the only writer of
// everything here; callers read the published state, which is immutable.
type Server struct {
	alias string
	cfg   config.Server
	host  Host
	// What the config says of all children, and the environment children
	// inherit: copied at newChild, never changed.
	limits      config.Limits
	callTimeout time.Duration
	environ     []string
	log         zerolog.Logger
	// clientInfo is what mcpmux calls itself in its initialize.
	clientInfo mcp.Implementation

	state   atomic.Pointer[State]
	refresh chan struct{} // the child said its tool list changed

	// exposed is cfg as Reexpose last changed how the child is exposed
	// (hide, read_only, prefix...); build builds the child's catalog from
	// each read of its lists under it.
	exposed atomic.Pointer[config.Server]
	build   atomic.Pointer[catalog.Builder]
	env     Env
}

// State is one published moment of a child's life. It is never
// modified; a new one replaces it and closes changed.
type State struct {
	Phase   Phase
	Session *Session              // non-nil only when ready
	Listed  *catalog.ChildCatalog // tools currently offered upstream; nil when withdrawn
	Attempt int                   // consecutive failed starts
	LastErr error
	changed chan struct{}
}

// Host is what a child needs of the multiplexer that runs it, and all it
// may reach of it: the child tells it what it published and hands it what
// the child's sessions receive that is not an answer to mcpmux's own
// request.
type Host interface {
	// Published is told of each state c publishes, once in force.
	Published(c *Server, old, st *State)
	// Restarted is told that c's session went away and c starts anew.
	Restarted(c *Server)
	// CatalogRead is told that c read its lists afresh.
	CatalogRead()
	// Spawn starts a child process.
	Spawn(ctx context.Context, spec childproc.Spec) (*childproc.Process, error)
	// SubscribedURIs are the URIs of c's resources some client subscribed to.
	SubscribedURIs(alias string) []string
	Request(ctx context.Context, c *Server, sess *Session, req transport.JSONRPCRequest) *transport.JSONRPCResponse
	ResourceUpdated(c *Server, n mcp.JSONRPCNotification)
	Progress(sess *Session, n mcp.JSONRPCNotification)
	Log(c *Server, sess *Session, n mcp.JSONRPCNotification)
	ApplyLogLevel(ctx context.Context, c *Server, sess *Session)
}

// Env is what every child of a multiplexer shares: the whole config, the
// environment children inherit, and how mcpmux names itself to them.
type Env struct {
	Config     *config.Config
	Environ    []string
	Log        zerolog.Logger // the multiplexer's; a child's lines add its alias
	ClientInfo mcp.Implementation
	// Pinned says that tool definitions are pinned: the catalog keeps
	// what a pin needs.
	Pinned bool
}

// New returns the supervisor of the child server cfg, run by h. It
// starts nothing: run does.
func New(h Host, env Env, cfg config.Server) *Server {
	c := &Server{
		alias:       cfg.Alias,
		cfg:         cfg,
		host:        h,
		limits:      env.Config.Limits,
		callTimeout: env.Config.Mux.CallTimeout,
		environ:     env.Environ,
		clientInfo:  env.ClientInfo,
		log:         env.Log.With().Str("server", cfg.Alias).Logger(),
		refresh:     make(chan struct{}, 1),
	}
	c.env = env
	c.exposed.Store(&cfg)
	c.build.Store(catalog.NewBuilder(env.Config, cfg, env.Pinned, c.log))
	c.state.Store(&State{Phase: PhaseStarting, changed: make(chan struct{})})
	return c
}

// Alias is the child's alias, its name in the config.
func (c *Server) Alias() string { return c.alias }

// Config is the child's entry of the config, as Reexpose last changed it.
// It must not be modified.
func (c *Server) Config() *config.Server { return c.exposed.Load() }

// Reexpose puts e, an entry that differs from the child's only in how the
// child is exposed (not in how it starts), in force: the child's lists are
// read again and built under it, and until then the catalog stays as it
// was; the process and its session are untouched.
func (c *Server) Reexpose(e config.Server) {
	c.build.Store(catalog.NewBuilder(c.env.Config, e, c.env.Pinned, c.log))
	c.exposed.Store(&e)
	select {
	case c.refresh <- struct{}{}:
	default:
	}
}

// Log is the child's logger: its lines name the child.
func (c *Server) Log() *zerolog.Logger { return &c.log }

// State is the state the child published last.
func (c *Server) State() *State { return c.state.Load() }

// Builder is what builds the child's catalog from each read of its lists.
func (c *Server) Builder() *catalog.Builder { return c.build.Load() }

// PublishListed publishes the child as ready with cat as its catalog, as a
// read of its lists would, and tells the host. It is for a host's tests,
// which offer catalogs without a process; a child that runs publishes its
// own.
func (c *Server) PublishListed(cat *catalog.ChildCatalog) {
	c.publish(State{Phase: PhaseReady, Listed: cat})
}

// publish replaces the state. Only the run goroutine calls it.
func (c *Server) publish(st State) {
	st.changed = make(chan struct{})
	old := c.state.Swap(&st)
	close(old.changed)
	c.host.Published(c, old, &st)
}

// session returns a ready session, waiting up to the startup timeout for the
// child to become ready.
func (c *Server) session(ctx context.Context) (*Session, error) {
	st, err := c.Ready(ctx)
	if err != nil {
		return nil, err
	}
	return st.Session, nil
}

// Ready is session, returning the state that holds the session, with the
// catalog read from it.
func (c *Server) Ready(ctx context.Context) (*State, error) {
	timer := time.NewTimer(c.cfg.StartupTimeout)
	defer timer.Stop()
	var wait telemetry.ChildWait
	for {
		st := c.state.Load()
		if st.Session != nil && !st.Session.Lost() {
			wait.Done(ctx, c.alias)
			return st, nil
		}
		if st.Phase == PhaseStopped {
			return nil, c.Unavailable(st)
		}
		wait.Begin(string(st.Phase))
		select {
		case <-st.changed:
		case <-timer.C:
			return nil, c.Unavailable(c.state.Load())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Server) Unavailable(st *State) error {
	why := "not ready within " + c.cfg.StartupTimeout.String()
	switch {
	case st.Phase == PhaseStopped:
		why = "mcpmux is shutting down"
	case st.LastErr != nil:
		why = st.LastErr.Error()
	}
	return fmt.Errorf("server %s is %w: %s", c.alias, ErrUnavailable, why)
}

// Drain waits until the child's session has no request waiting for its
// answer (none is sent to a child taken out of the catalog), the session
// is lost, or ctx ends; a child that is not ready has nothing to drain.
func (c *Server) Drain(ctx context.Context) {
	if sess := c.State().Session; sess != nil {
		sess.idle(ctx)
	}
}

// Inherit has c, not yet run, take over prev's place as a restarted child
// does: prev's tools stay listed as c's and calls wait for c to be ready
// (up to its startup_timeout). For a child that starts only once prev has
// stopped (replace = "stop-first").
func (c *Server) Inherit(prev *Server) {
	c.publish(State{Phase: PhaseRestarting, Listed: prev.State().Listed})
}

// Run supervises the child until ctx ends, then stops it. firstDone is
// called once the first start attempt has succeeded or failed (it must be
// safe to call more than once).
func (c *Server) Run(ctx context.Context, firstDone func()) {
	defer firstDone() // ctx may end during the first attempt
	sv := &supervisor{c: c}
	for {
		began := time.Now()
		sess, cat, err := sv.start(ctx)
		if ctx.Err() != nil {
			if sess != nil {
				c.stopSession(sess)
			}
			break
		}
		if err != nil {
			sv.attempt++
			c.log.Error().Err(err).Int("attempt", sv.attempt).Msg("server failed to start")
			phase := PhaseDown
			if sv.listed != nil {
				phase = PhaseRestarting
			}
			c.publish(State{Phase: phase, Listed: sv.listed, Attempt: sv.attempt, LastErr: err})
			firstDone()
		} else {
			sv.listed, sv.withdraw = cat, nil
			ready := c.log.Info().Int("tools", len(cat.Tools())).Int("prompts", len(cat.Entries[catalog.KindPrompt])).
				Int("resources", len(cat.Entries[catalog.KindResource])+len(cat.Entries[catalog.KindTemplate])).
				Int64("start_ms", time.Since(began).Milliseconds()) // spawned, initialized, lists read
			if sess.proc != nil {
				ready = ready.Int("pid", sess.proc.Pid())
			}
			ready.Msg("server ready")
			c.publish(State{Phase: PhaseReady, Session: sess, Listed: cat})
			firstDone()
			c.host.CatalogRead()

			why := c.serve(ctx, sess, &sv.listed)
			if ctx.Err() != nil {
				// Published first, so that no call picks the session up while
				// it stops. The tools stay listed: withdrawing them would only
				// send clients a list_changed on the way out.
				c.publish(State{Phase: PhaseStopped, Listed: sv.listed})
				c.stopSession(sess)
				return
			}
			uptime := time.Since(sess.started)
			c.log.Warn().Str("why", why).Dur("uptime", uptime).Msg("server went away; restarting")
			c.host.Restarted(c)
			c.teardown(sess)
			if uptime >= healthyUptime {
				sv.attempt = 0
			}
			sv.attempt++
			c.publish(State{Phase: PhaseRestarting, Listed: sv.listed, Attempt: sv.attempt,
				LastErr: restartErr(sess)})
			sv.withdraw = time.After(c.cfg.StartupTimeout)
		}
		if !sv.sleep(ctx, backoff(sv.attempt)) {
			break
		}
	}
	c.publish(State{Phase: PhaseStopped, Listed: sv.listed})
}

// restartErr is a child's last error while it restarts after sess was lost.
func restartErr(sess *Session) error {
	return link.Failure(sess.lostAs, fmt.Errorf("restarting after it exited (%s)", sess.lostWhy))
}

// supervisor is the state of one child's run loop; only run touches it.
type supervisor struct {
	c       *Server
	attempt int                   // consecutive failures, for the backoff
	listed  *catalog.ChildCatalog // what the child offers upstream; nil when withdrawn
	// withdraw fires when a child that went away has not come back within
	// its startup timeout; nil when no withdrawal is pending.
	withdraw <-chan time.Time
}

// start makes one start attempt. It runs the attempt in a goroutine, which
// it always waits for, so that a pending withdrawal can happen during a slow
// attempt.
func (sv *supervisor) start(ctx context.Context) (*Session, *catalog.ChildCatalog, error) {
	type started struct {
		sess *Session
		cat  *catalog.ChildCatalog
		err  error
	}
	res := make(chan started, 1)
	go func() {
		s, cat, err := sv.c.start(ctx)
		res <- started{s, cat, err}
	}()
	for {
		select {
		case r := <-res:
			return r.sess, r.cat, r.err
		case <-sv.withdraw:
			sv.withdrawNow()
		}
	}
}

// sleep waits d, or until ctx ends (reporting false).
func (sv *supervisor) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		case <-sv.withdraw:
			sv.withdrawNow()
		}
	}
}

func (sv *supervisor) withdrawNow() {
	sv.withdraw, sv.listed = nil, nil
	st := *sv.c.state.Load()
	st.Listed = nil
	sv.c.log.Warn().Msg("server still not ready: its tools are withdrawn until it is back")
	sv.c.publish(st)
}

func backoff(attempt int) time.Duration {
	d := minBackoff
	for i := 1; i < attempt && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// serve watches a ready session until it is lost or ctx ends, re-reading the
// catalog whenever the child says it changed. It returns why it stopped.
func (c *Server) serve(ctx context.Context, sess *Session, listed **catalog.ChildCatalog) string {
	var lastRead time.Time
	for {
		select {
		case <-ctx.Done():
			return "mcpmux stopping"
		case <-sess.lost:
			return sess.lostWhy
		case <-c.refresh:
			// Notifications that arrive meanwhile fold into the one token
			// c.refresh holds, so a flood costs one read per gap.
			if wait := minRereadGap - time.Since(lastRead); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return "mcpmux stopping"
				case <-sess.lost:
					t.Stop()
					return sess.lostWhy
				case <-t.C:
				}
			}
			select { // what came during the wait is read now
			case <-c.refresh:
			default:
			}
			lastRead = time.Now()
			lctx, cancel := context.WithTimeout(ctx, c.cfg.StartupTimeout)
			cat, err := c.readCatalog(lctx, sess)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					c.log.Error().Err(err).Msg("re-reading the tool list failed; keeping the previous one")
				}
				continue
			}
			*listed = cat
			c.publish(State{Phase: PhaseReady, Session: sess, Listed: cat})
			c.host.CatalogRead()
		}
	}
}

// listPage is one page of a list result, its items kept raw so that no
// field is lost on the way through.
type listPage struct {
	Items      []json.RawMessage
	NextCursor string `json:"nextCursor"`
}

// readCatalog reads each of the child's lists to its last page (those its
// capabilities say it has) and builds its catalog. It fails once the lists
// take more than max_catalog_pages pages, or more than max_catalog_bytes
// together.
func (c *Server) readCatalog(ctx context.Context, sess *Session) (*catalog.ChildCatalog, error) {
	defer memory.TightGC()()
	var raw [catalog.NumKinds][]json.RawMessage
	budget := catalogBudget{pages: c.limits.MaxCatalogPages, bytes: c.limits.MaxCatalogBytes}
	caps := sess.caps
	for k := range catalog.NumKinds {
		switch {
		// A server that declares prompts or resources but no tools has none;
		// one that declares nothing at all is asked for its tools anyway.
		case k == catalog.KindTool && caps.Tools == nil && (caps.Prompts != nil || caps.Resources != nil),
			k == catalog.KindPrompt && caps.Prompts == nil,
			(k == catalog.KindResource || k == catalog.KindTemplate) && caps.Resources == nil:
			continue
		}
		items, err := c.readList(ctx, sess, k, &budget)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", catalog.KindWire[k].List, err)
		}
		raw[k] = items
	}
	cat := c.build.Load().Build(raw, caps)
	cat.Instructions = sess.instructions
	return cat, nil
}

// catalogBudget is what is left of max_catalog_pages and max_catalog_bytes
// for one read of a child's lists.
type catalogBudget struct {
	pages int
	bytes int64
}

// readList reads one list to its last page.
func (c *Server) readList(ctx context.Context, sess *Session, k catalog.Kind, budget *catalogBudget) ([]json.RawMessage, error) {
	lim := c.limits
	var items []json.RawMessage
	cursor := ""
	seen := map[string]bool{}
	// The limits bound all of a child's lists together.
	what, is, has := "the "+catalog.KindWire[k].Label+" list", "is", "has"
	if budget.pages < lim.MaxCatalogPages {
		what, is, has = what+" and the lists before it", "are", "have"
	}
	for page := 0; ; page++ {
		if budget.pages == 0 {
			return nil, fmt.Errorf("%s %s more than max_catalog_pages (%d) pages", what, has, lim.MaxCatalogPages)
		}
		budget.pages--
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		result, err := sess.Request(ctx, nil, catalog.KindWire[k].List, params)
		if err != nil {
			return nil, err
		}
		if budget.bytes -= int64(len(result)); budget.bytes < 0 {
			return nil, fmt.Errorf("%s %s larger than max_catalog_bytes (%s) after %d pages",
				what, is, config.FormatSize(lim.MaxCatalogBytes), page+1)
		}
		p, err := decodePage(result, catalog.KindWire[k].Member)
		if err != nil {
			return nil, fmt.Errorf("decode page %d: %w", page+1, err)
		}
		items = append(items, p.Items...)
		if p.NextCursor == "" {
			return items, nil
		}
		if seen[p.NextCursor] {
			return nil, fmt.Errorf("cursor %q repeats", p.NextCursor)
		}
		seen[p.NextCursor] = true
		cursor = p.NextCursor
	}
}

// decodePage decodes one page of a list whose items are in member, as
// decoding it into a map would (a member given twice counts as its last;
// a null page is an empty one). The items are result's own bytes, not
// copies: a page is read once, and the catalog built from it keeps
// definitions of its own.
func decodePage(result []byte, member string) (listPage, error) {
	if !jsonwire.Valid(result) {
		return listPage{}, errors.New("the result is not valid JSON")
	}
	top, ok := jsonwire.Members(result)
	if !ok {
		if string(bytes.TrimSpace(result)) == "null" {
			return listPage{}, nil
		}
		return listPage{}, errors.New("the result is not a JSON object")
	}
	var p listPage
	if c := top.Last("nextCursor"); c != nil && string(result[c.Start:c.End]) != "null" {
		if err := json.Unmarshal(result[c.Start:c.End], &p.NextCursor); err != nil {
			return listPage{}, fmt.Errorf("nextCursor: %w", err)
		}
	}
	if m := top.Last(member); m != nil && string(result[m.Start:m.End]) != "null" {
		items, ok := arrayItems(result[m.Start:m.End])
		if !ok {
			return listPage{}, fmt.Errorf("%s: not an array", member)
		}
		p.Items = items
	}
	return p, nil
}

// arrayItems returns the values of the valid JSON value v, each v's own
// bytes, and whether it is an array.
func arrayItems(v []byte) ([]json.RawMessage, bool) {
	if v[0] != '[' {
		return nil, false
	}
	var items []json.RawMessage
	i := jsonwire.SkipSpace(v, 1)
	if v[i] == ']' {
		return nil, true
	}
	for {
		end := jsonwire.SkipValue(v, i)
		if end < 0 {
			return nil, false
		}
		items = append(items, v[i:end:end])
		i = jsonwire.SkipSpace(v, end)
		switch v[i] {
		case ']':
			return items, true
		case ',':
			i = jsonwire.SkipSpace(v, i+1)
		default:
			return nil, false
		}
	}
}

// resubscribe renews, on a child's new session, the subscriptions sessions
// hold to its resources.
func (c *Server) resubscribe(ctx context.Context, sess *Session) {
	for _, uri := range c.host.SubscribedURIs(c.alias) {
		if _, err := sess.Request(ctx, nil, string(mcp.MethodResourcesSubscribe), map[string]any{"uri": uri}); err != nil {
			c.log.Warn().Err(err).Str("child_uri", uri).Msg("renewing a subscription failed")
		}
	}
}
