package mux

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
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
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

// child supervises one child server. Its run goroutine is the only writer of
// everything here; callers read the published state, which is immutable.
type child struct {
	alias string
	cfg   config.Server
	host  host
	// What the config says of all children, and the environment children
	// inherit: copied at newChild, never changed.
	limits      config.Limits
	callTimeout time.Duration
	environ     []string
	log         zerolog.Logger

	state   atomic.Pointer[childState]
	refresh chan struct{} // the child said its tool list changed

	// build builds the child's catalog from each read of its lists.
	build *catalog.Builder
}

// childState is one published moment of a child's life. It is never
// modified; a new one replaces it and closes changed.
type childState struct {
	phase   Phase
	sess    *session              // non-nil only when ready
	listed  *catalog.ChildCatalog // tools currently offered upstream; nil when withdrawn
	attempt int                   // consecutive failed starts
	lastErr error
	changed chan struct{}
}

// host is what a child needs of the multiplexer that runs it, and all it
// may reach of it: the child tells it what it published and hands it what
// the child's sessions receive that is not an answer to mcpmux's own
// request.
type host interface {
	// childPublished is told of each state c publishes, once in force.
	childPublished(c *child, old, st *childState)
	// childRestarted is told that c's session went away and c starts anew.
	childRestarted(c *child)
	// catalogRead is told that c read its lists afresh.
	catalogRead()
	// spawn starts a child process.
	spawn(ctx context.Context, spec childproc.Spec) (*childproc.Process, error)
	// subscribedURIs are the URIs of c's resources some client subscribed to.
	subscribedURIs(alias string) []string
	childRequest(ctx context.Context, c *child, sess *session, req transport.JSONRPCRequest) *transport.JSONRPCResponse
	resourceUpdated(c *child, n mcp.JSONRPCNotification)
	progress(sess *session, n mcp.JSONRPCNotification)
	childLog(c *child, sess *session, n mcp.JSONRPCNotification)
	applyLogLevel(ctx context.Context, c *child, sess *session)
}

func newChild(m *Mux, cfg config.Server) *child {
	c := &child{
		alias:       cfg.Alias,
		cfg:         cfg,
		host:        m,
		limits:      m.cfg.Limits,
		callTimeout: m.cfg.Mux.CallTimeout,
		environ:     m.environ,
		log:         m.log.With().Str("server", cfg.Alias).Logger(),
		refresh:     make(chan struct{}, 1),
	}
	c.build = catalog.NewBuilder(m.cfg, cfg, m.pinning != nil, c.log)
	c.state.Store(&childState{phase: PhaseStarting, changed: make(chan struct{})})
	return c
}

// publish replaces the state. Only the run goroutine calls it.
func (c *child) publish(st childState) {
	st.changed = make(chan struct{})
	old := c.state.Swap(&st)
	close(old.changed)
	c.host.childPublished(c, old, &st)
}

// session returns a ready session, waiting up to the startup timeout for the
// child to become ready.
func (c *child) session(ctx context.Context) (*session, error) {
	st, err := c.ready(ctx)
	if err != nil {
		return nil, err
	}
	return st.sess, nil
}

// ready is session, returning the state that holds the session, with the
// catalog read from it.
func (c *child) ready(ctx context.Context) (*childState, error) {
	timer := time.NewTimer(c.cfg.StartupTimeout)
	defer timer.Stop()
	for {
		st := c.state.Load()
		if st.sess != nil && !st.sess.isLost() {
			return st, nil
		}
		if st.phase == PhaseStopped {
			return nil, c.unavailable(st)
		}
		select {
		case <-st.changed:
		case <-timer.C:
			return nil, c.unavailable(c.state.Load())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *child) unavailable(st *childState) error {
	why := "not ready within " + c.cfg.StartupTimeout.String()
	switch {
	case st.phase == PhaseStopped:
		why = "mcpmux is shutting down"
	case st.lastErr != nil:
		why = st.lastErr.Error()
	}
	return fmt.Errorf("server %s is %w: %s", c.alias, ErrUnavailable, why)
}

// run supervises the child until ctx ends, then stops it. firstDone is
// called once the first start attempt has succeeded or failed (it must be
// safe to call more than once).
func (c *child) run(ctx context.Context, firstDone func()) {
	defer firstDone() // ctx may end during the first attempt
	sv := &supervisor{c: c}
	for {
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
			c.publish(childState{phase: phase, listed: sv.listed, attempt: sv.attempt, lastErr: err})
			firstDone()
		} else {
			sv.listed, sv.withdraw = cat, nil
			ready := c.log.Info().Int("tools", len(cat.Tools())).Int("prompts", len(cat.Entries[catalog.KindPrompt])).
				Int("resources", len(cat.Entries[catalog.KindResource])+len(cat.Entries[catalog.KindTemplate]))
			if sess.proc != nil {
				ready = ready.Int("pid", sess.proc.Pid())
			}
			ready.Msg("server ready")
			c.publish(childState{phase: PhaseReady, sess: sess, listed: cat})
			firstDone()
			c.host.catalogRead()

			why := c.serve(ctx, sess, &sv.listed)
			if ctx.Err() != nil {
				// Published first, so that no call picks the session up while
				// it stops. The tools stay listed: withdrawing them would only
				// send clients a list_changed on the way out.
				c.publish(childState{phase: PhaseStopped, listed: sv.listed})
				c.stopSession(sess)
				return
			}
			uptime := time.Since(sess.started)
			c.log.Warn().Str("why", why).Dur("uptime", uptime).Msg("server went away; restarting")
			c.host.childRestarted(c)
			c.teardown(sess)
			if uptime >= healthyUptime {
				sv.attempt = 0
			}
			sv.attempt++
			c.publish(childState{phase: PhaseRestarting, listed: sv.listed, attempt: sv.attempt,
				lastErr: restartErr(sess)})
			sv.withdraw = time.After(c.cfg.StartupTimeout)
		}
		if !sv.sleep(ctx, backoff(sv.attempt)) {
			break
		}
	}
	c.publish(childState{phase: PhaseStopped, listed: sv.listed})
}

// restartErr is a child's last error while it restarts after sess was lost.
func restartErr(sess *session) error {
	return failure(sess.lostAs, fmt.Errorf("restarting after it exited (%s)", sess.lostWhy))
}

// supervisor is the state of one child's run loop; only run touches it.
type supervisor struct {
	c       *child
	attempt int                   // consecutive failures, for the backoff
	listed  *catalog.ChildCatalog // what the child offers upstream; nil when withdrawn
	// withdraw fires when a child that went away has not come back within
	// its startup timeout; nil when no withdrawal is pending.
	withdraw <-chan time.Time
}

// start makes one start attempt. It runs the attempt in a goroutine, which
// it always waits for, so that a pending withdrawal can happen during a slow
// attempt.
func (sv *supervisor) start(ctx context.Context) (*session, *catalog.ChildCatalog, error) {
	type started struct {
		sess *session
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
	st.listed = nil
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
func (c *child) serve(ctx context.Context, sess *session, listed **catalog.ChildCatalog) string {
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
			c.publish(childState{phase: PhaseReady, sess: sess, listed: cat})
			c.host.catalogRead()
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
func (c *child) readCatalog(ctx context.Context, sess *session) (*catalog.ChildCatalog, error) {
	defer tightGC()()
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
	cat := c.build.Build(raw, caps)
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
func (c *child) readList(ctx context.Context, sess *session, k catalog.Kind, budget *catalogBudget) ([]json.RawMessage, error) {
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
		result, err := sess.rawRequest(ctx, nil, catalog.KindWire[k].List, params)
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

// The Mux as its children's host.

func (m *Mux) childPublished(c *child, old, st *childState) {
	if old.phase != st.phase {
		m.observe.ChildPhase(c.alias, st.phase)
	}
	if old.listed != st.listed && !m.starting.Load() {
		m.rebuildCatalog()
	}
}

func (m *Mux) childRestarted(c *child) { m.observe.ChildRestarted(c.alias) }

func (m *Mux) catalogRead() {
	if !m.starting.Load() { // otherwise Start returns it once for all
		m.memory.request()
	}
}

func (m *Mux) spawn(ctx context.Context, spec childproc.Spec) (*childproc.Process, error) {
	return m.spawner.Start(ctx, spec)
}

func (m *Mux) subscribedURIs(alias string) []string { return m.subs.uris(alias) }
