// Package mux is the multiplexer: it supervises the child servers, merges
// what they offer (tools, prompts, resources, resource templates) into one
// immutable snapshot, routes each request by a look-up in it, enforces
// hiding, argument validation, pins and per-identity policy, relays what a
// child does during a call, and serves the result upstream as one MCP
// server, over stdio and streamable HTTP.
//
// Every request a client sends is read once by the front end and, when
// mcpmux answers it, served by the one pipeline for both edges, which
// answers with bytes: a child's result is relayed as the child sent it,
// with only the id and the URIs rewritten. What mcpmux does not answer
// itself (the handshake, the task store, what it cannot fully parse) goes
// to mcp-go's server, at one place.
//
// The root only wires the packages below, starts them and stops them:
// children.go is the Mux as its children's host (package child), edges.go
// as the backend of its edges (package edge), pins.go its pinning.
//
// Packages below mux hold what needs none of its state: fleet owns the
// children in force, their supervisors and the changes of the server list
// while mcpmux runs; relay builds
// mcp-go's server and its hooks, and relays a child's log messages, progress
// and requests to the client of its call and the client's notifications to
// the children; tasks runs the 2025-11-25 tasks mcp-go hosts; pipeline
// serves every request mcpmux answers itself, step by step, and owns the
// calls in flight, the per-child slots and rate limits, the rounds and the
// subscriptions; publish builds each new snapshot of the catalog, holds the
// definitions that differ from their pins, and runs the one goroutine that
// tells mcp-go and the sessions what changed; edge owns the stdio and HTTP
// edges and their front end; child owns the children, their sessions and
// their calls in flight; catalog owns the snapshot of what the children
// offer and each caller's view of it; upstream owns the upstream sessions;
// frame reads a message once and writes mcpmux's own answers; jsonwire reads
// and edits JSON (and JSON-RPC ids) without decoding it; args decodes a
// call's arguments, vets each tool's inputSchema and checks calls against
// it; naming makes the exposed names and URIs, and rewrites the URIs in what
// a child sends.
package mux

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/childproc"
	"github.com/mcpmux/mcpmux/internal/liblog"
	"github.com/mcpmux/mcpmux/internal/memory"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/fleet"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/mux/relay"
	"github.com/mcpmux/mcpmux/mux/searchmode"
	"github.com/mcpmux/mcpmux/mux/tasks"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/pins"
	"github.com/mcpmux/mcpmux/policy"
)

// Version is mcpmux's version, reported to clients and children.
var Version = "0.1.0-dev"

// Mux multiplexes the child servers of one config.
type Mux struct {
	cfg        *config.Config
	policies   *policy.Store
	log        zerolog.Logger
	environ    []string
	supervisor string
	observe    pipeline.Observer
	tracing    *telemetry.Tracing // nil: off

	fleet    *fleet.Fleet // the children in force
	spawner  *childproc.Spawner
	ownSpawn bool // spawner is the Mux's own, closed by Close
	catalog  atomic.Pointer[catalog.Catalog]

	pub      *publish.Publisher // builds and publishes the merged catalog
	p        *pipeline.Pipeline // serves what mcpmux answers itself
	relay    *relay.Relay       // mcp-go's server and the children's traffic to their clients
	srv      *server.MCPServer
	sessions upstream.Registry
	tasks    *tasks.Table // upstream tasks mcp-go hosts

	memory *memory.Returner // returns freed memory once catalogs are read

	initial     chan struct{} // closed once every child's first start is over
	initialOnce sync.Once
	// starting is set while the children's first starts run (Start), when
	// nothing upstream reads the merged catalog yet (see WaitReady): a
	// child's catalog then only publishes the child's state, and the merged
	// one is built once, as the last first start ends.
	starting atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Options are what a Mux takes from the process that hosts it rather than
// from the config.
type Options struct {
	Log zerolog.Logger
	// Supervisor is the path of a binary that runs childproc.RunSupervisor when
	// its first argument is childproc.SupervisorArg (mcpmux itself), so that no
	// descendant of a child outlives mcpmux; "" starts children directly.
	Supervisor string
	// Spawner, when not nil, starts the children instead of one made from
	// Supervisor: the caller's, which it may have started early
	// (Spawner.Prestart) and closes after Close.
	Spawner *childproc.Spawner
	// Observer is told what happens, for metrics; nil observes nothing.
	Observer pipeline.Observer
	// Pins are the tool and prompt pins the catalog is checked against
	// under [mux] pinning; nil pins nothing.
	Pins *pins.Store
	// ComparePins has every tool and prompt compared with its pin and
	// reported (PinReport), whatever [mux] pinning says, none held, none
	// pinned on first sight and none logged: for mcpmux pins diff and
	// approve, which serve nothing and print what they found.
	ComparePins bool
	// Tracing starts a span for every request mcpmux answers; nil traces
	// nothing.
	Tracing *telemetry.Tracing
	// SealSessionID and SealRequestState, when not nil, turn each new HTTP
	// session id and each round's requestState into the one handed out:
	// with several replicas (package replicas), sealed to name this one as
	// the owner. nil hands out the random ids as they are.
	SealSessionID, SealRequestState func(local string) string
	// TaskIDs, when not nil, seals the upstream task ids handed out, so
	// that they name this replica too (tasks.IDs).
	TaskIDs tasks.IDs
}

// New prepares a Mux for cfg. It starts nothing; call Start.
func New(cfg *config.Config, policies *policy.Store, opts Options) *Mux {
	log := opts.Log
	if opts.Tracing != nil {
		// Every line written with a request's context carries its trace's ids.
		log = log.Hook(telemetry.LogHook{})
	}
	m := &Mux{
		cfg:        cfg,
		policies:   policies,
		log:        log,
		supervisor: opts.Supervisor,
		spawner:    opts.Spawner,
		observe:    opts.Observer,
		tracing:    opts.Tracing,
		environ:    os.Environ(),
		initial:    make(chan struct{}),
		memory:     memory.NewReturner(memory.Return, memory.ReturnEvery),
	}
	if m.observe == nil {
		m.observe = pipeline.NopObserver{}
	}
	m.catalog.Store(catalog.Empty)
	pinning := publish.NewPinning(cfg, opts.Pins, opts.ComparePins, m.log)
	env := child.Env{Config: cfg, Environ: m.environ, Log: m.log, Pinned: pinning != nil,
		ClientInfo: mcp.Implementation{Name: "mcpmux", Version: Version}}
	m.fleet = fleet.New(fleet.Deps{
		New:         func(e config.Server) *child.Server { return child.New(childHost{m}, env, e) },
		Rebuild:     func(published func()) { m.pub.RebuildThen(published) },
		Regate:      func(c *child.Server) { m.p.Calls().Regate(c) },
		Initial:     m.initial,
		CallTimeout: func() time.Duration { return m.p.Settings().CallTimeout },
	}, cfg.Servers)
	// The announcer registers task tools with mcp-go's server, built last
	// (by the relay): it takes the task table's hooks.
	announcer := publish.NewAnnouncer(&m.catalog, m.policies, &m.sessions,
		func(cat *catalog.Catalog) { publish.RegisterTaskTools(m.srv, cat, m.tasks.Handle) },
		func(cat *catalog.Catalog, v catalog.Viewer) []byte { return m.p.ToolList(cat, v) }, log)
	m.pub = publish.New(m.fleet.Set(), pinning, &m.catalog, announcer, log)
	m.p = pipeline.New(pipeline.Deps{Config: cfg, Policies: policies, Log: log, Observer: m.observe, Tracing: m.tracing,
		Children: m.fleet.Set(), Catalog: &m.catalog, Pub: m.pub, Sessions: &m.sessions, Ready: m.initial, Version: Version,
		SealState: opts.SealRequestState})
	m.sessions.SealID = opts.SealSessionID
	m.tasks = tasks.New(&m.sessions, m.p, opts.TaskIDs, log, m.tracing)
	m.relay = relay.New(relay.Deps{Config: cfg, Policies: policies, Log: log, Observer: m.observe, Version: Version,
		Children: m.fleet.Set(), Catalog: &m.catalog, Sessions: &m.sessions, Pipeline: m.p, Tasks: m.tasks, Tracing: m.tracing, Ready: m.initial})
	m.srv = m.relay.Server()
	return m
}

// Start launches every child's supervisor. Children start in parallel; the
// first tools/list waits for them (see WaitReady).
func (m *Mux) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	if m.spawner == nil {
		m.spawner, m.ownSpawn = childproc.NewSpawner(m.supervisor), true
	}
	m.spawner.SetSupervisorStderr(liblog.Std(m.log.With().Str("component", "supervisor").Logger(), slog.LevelError).Writer())
	m.wg.Go(func() { m.pub.Announcer().Run(ctx) })
	m.wg.Go(memory.DropStartPages) // while the children start, which leaves mcpmux waiting
	var pending sync.WaitGroup
	children := m.list()
	pending.Add(len(children))
	m.starting.Store(true)
	// Lowered until the first catalog is published: the merge, the pins
	// of first sight and the publishing that follow the children's reads
	// are where the heap peaks at start-up.
	restoreGC := memory.TightGC()
	m.fleet.Start(ctx, func(*child.Server) { pending.Done() })
	m.wg.Go(func() {
		pending.Wait()
		// Cleared before the build, so that a child publishing from now on
		// rebuilds itself, and one that saw it set is in this build.
		m.starting.Store(false)
		// Ready once mcp-go and the sessions know of the first catalog.
		m.pub.RebuildThen(func() { m.initialOnce.Do(func() { close(m.initial) }) })
		restoreGC()
		m.memory.Request()
	})
}

// WaitReady waits until every child has become ready or failed its first
// start, or ctx ends. Each child's attempt is bounded by its own
// startup_timeout.
func (m *Mux) WaitReady(ctx context.Context) error { return m.p.WaitReady(ctx) }

// WaitIdle waits until no call is being forwarded, or ctx ends. A drain
// on shutdown uses it, once no new calls can arrive.
func (m *Mux) WaitIdle(ctx context.Context) error { return m.p.Calls().WaitIdle(ctx) }

// CutCalls ends every call still in flight, now and from now on; each is
// answered with an error result naming cause (ErrShuttingDown on shutdown).
func (m *Mux) CutCalls(cause error) { m.p.Calls().Cut(cause) }

// Close stops every child (stdin closed, then SIGTERM, then SIGKILL to its
// process group) and waits for all of mcpmux's goroutines.
func (m *Mux) Close() {
	if m.cancel == nil {
		return
	}
	m.p.Calls().Cut(pipeline.ErrShuttingDown)
	m.sessions.Close()
	m.tasks.Close()
	m.p.Close()
	m.cancel()
	m.fleet.Close()
	m.wg.Wait()
	m.memory.Close()
	if m.ownSpawn {
		m.spawner.Close()
	}
}

// ApplyServers puts entries, a validated server list, in force while m
// runs, changing only what differs from the list in force (fleet.Apply).
func (m *Mux) ApplyServers(ctx context.Context, entries []config.Server) fleet.Changes {
	return m.fleet.Apply(ctx, entries)
}

// Retune puts in force, for the requests that start from now on, the
// settings of cfg that change while m runs (pipeline.Settings): the call
// timeout, the rate limit and the page size.
func (m *Mux) Retune(cfg *config.Config) {
	was := m.p.Settings()
	m.p.Retune(cfg)
	if now := m.p.Settings(); now.Catalog != was.Catalog || now.SearchAbove != was.SearchAbove {
		m.pub.Announcer().Retell()
	}
}

// list is the children in force, in config order.
func (m *Mux) list() []*child.Server { return m.fleet.List() }

// ToolInfo describes one tool as an identity sees it.
type ToolInfo struct {
	Name      string // exposed
	Server    string // the alias of the server it comes from
	ChildName string // the server's own name for it
	ReadOnly  bool
	Def       json.RawMessage // the definition as listed upstream
}

// Tools lists what the caller of ctx (WithCaller: its identity and claims)
// may see, in catalog order.
func (m *Mux) Tools(ctx context.Context) []ToolInfo {
	var out []ToolInfo
	for _, t := range m.catalog.Load().Visible(catalog.KindTool, m.p.ViewerOf(ctx)) {
		out = append(out, ToolInfo{Name: t.Name, Server: t.Server, ChildName: t.Orig, ReadOnly: t.ReadOnly, Def: t.Def})
	}
	return out
}

// ListSizes are the sizes of the tools/list a caller is sent, in bytes:
// with every tool it may call listed (Full), and in search mode (Search,
// mcpmux's two tools and its policy's always ones); Searching says which
// one is in force for it.
type ListSizes struct {
	Full, Search int
	Searching    bool
}

// ToolListSizes are the ListSizes of the caller of ctx.
func (m *Mux) ToolListSizes(ctx context.Context) ListSizes {
	cat, v := m.catalog.Load(), m.p.ViewerOf(ctx)
	full := cat.List(catalog.KindTool, v)
	search := searchmode.For(m.cfg.Mux.Separator).List(cat.Listed(catalog.KindTool, v).Entries, v.Policy)
	return ListSizes{Full: len(full), Search: len(search), Searching: pipeline.Searching(m.p.Settings(), cat, v)}
}

// CallTool calls the tool exposed as name for identity with arguments, as
// a tools/call of a client of identity would; ctx carries the caller
// (WithCaller). It writes one audit line.
func (m *Mux) CallTool(ctx context.Context, identity, name string, arguments any) pipeline.Result {
	return m.p.CallTool(ctx, identity, name, arguments)
}

// Unavailable explains a name that is not in the catalog because the
// server it would belong to offers no tools right now (it never started, or
// its tools were withdrawn): the error says why. It returns nil otherwise.
// It is for messages only; calls are never routed by splitting names.
func (m *Mux) Unavailable(name string) error {
	for _, c := range m.list() {
		st := c.State()
		if st.Listed == nil && strings.HasPrefix(name, c.Alias()+m.cfg.Mux.Separator) {
			return c.Unavailable(st)
		}
	}
	return nil
}

// ChildStatus is one child's published state, for status output.
type ChildStatus struct {
	Alias   string
	Phase   child.Phase
	Attempt int
	LastErr error
	Tools   int
	// Required says whether /readyz waits for the child (its required).
	Required bool
}

// Status reports every child's state in config order.
func (m *Mux) Status() []ChildStatus {
	var out []ChildStatus
	for _, c := range m.list() {
		st := c.State()
		n := 0
		if st.Listed != nil {
			n = len(st.Listed.Tools())
		}
		out = append(out, ChildStatus{Alias: c.Alias(), Phase: st.Phase, Attempt: st.Attempt, LastErr: st.LastErr, Tools: n,
			Required: c.Config().Required})
	}
	return out
}

func (m *Mux) maxStartupTimeout() time.Duration {
	var d time.Duration
	for _, c := range m.list() {
		d = max(d, c.Config().StartupTimeout)
	}
	return d
}

// WithCaller returns a context that carries the caller's identity and the
// claims of the JWT that named it (nil for any other credential): what an
// edge or a command hands every request it makes of m.
func WithCaller(ctx context.Context, identity string, claims map[string]any) context.Context {
	return upstream.WithCaller(ctx, identity, claims)
}
