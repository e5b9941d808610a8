// Package pipeline is the one request pipeline of both edges: a request
// mcpmux answers itself (tools/call, prompts/get, resources/read,
// completion/complete, the lists, resource subscriptions, of both protocol
// eras) goes through its steps in order (admission and rate limit, look-up
// in the snapshot, policy, rules and pins, argument check, the child, the
// answer, audit) and is answered with bytes, a child's result relayed as
// the child sent it with only the id and the URIs rewritten.
//
// The Pipeline runs the steps; what they hold across requests has a type
// of its own: the per-child slots and per-identity rate limits
// (admission.go), the calls in flight on their way to the children
// (Forwarder, call.go), a 2026-07-28 client's rounds waiting for its retry
// (rounds.go), the resource subscriptions (mux/subscriptions) and the audit
// line of every request (Auditor).
package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/mux/searchmode"
	"github.com/mcpmux/mcpmux/mux/subscriptions"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Pipeline serves the requests mcpmux answers itself.
type Pipeline struct {
	cfg      *config.Config
	settings atomic.Pointer[Settings] // settings.go
	policies *policy.Store
	log      zerolog.Logger
	observe  Observer
	tracing  *telemetry.Tracing // nil: off

	children *atomic.Pointer[child.Set] // the server list in force
	catalog  *atomic.Pointer[catalog.Catalog]
	pub      *publish.Publisher
	sessions *upstream.Registry
	ready    <-chan struct{} // closed once every child's first start is over

	own        *searchmode.Tools // find_tools and call_tool, in search mode
	decoration decorator
	audit      Auditor // audit.go
	subs       *subscriptions.Table
	rounds     roundTable // 2026-07-28 calls waiting for input (rounds.go)
	admit      admission  // rate limits and max_in_flight (admission.go)
	calls      Forwarder  // the calls in flight to the children (call.go)
}

// Deps are what a Pipeline serves from.
type Deps struct {
	Config   *config.Config
	Policies *policy.Store
	Log      zerolog.Logger
	Observer Observer // nil observes nothing
	// Tracing starts the spans of every request; nil traces nothing.
	Tracing  *telemetry.Tracing
	Children *atomic.Pointer[child.Set]
	Catalog  *atomic.Pointer[catalog.Catalog]
	Pub      *publish.Publisher
	Sessions *upstream.Registry
	// Ready is closed once every child's first start is over: the lists
	// wait for it.
	Ready <-chan struct{}
	// Version is mcpmux's, named in every 2026-07-28 result.
	Version string
	// SealState, when not nil, turns each round's random requestState into
	// the one handed out (Options.SealRequestState of package mux).
	SealState func(local string) string
}

// New returns the pipeline of d.
func New(d Deps) *Pipeline {
	p := &Pipeline{
		cfg: d.Config, policies: d.Policies, log: d.Log, observe: d.Observer, tracing: d.Tracing,
		children: d.Children,
		catalog:  d.Catalog, pub: d.Pub, sessions: d.Sessions, ready: d.Ready,
		decoration: decorator{frame.Decoration{Server: mcp.Implementation{Name: "mcpmux", Version: d.Version}}},
		own:        searchmode.For(d.Config.Mux.Separator),
	}
	if p.observe == nil {
		p.observe = NopObserver{}
	}
	p.audit = Auditor{log: d.Log.With().Str("log", "audit").Logger(), observe: p.observe, catalog: d.Catalog,
		pinning: d.Pub.Pinning, viewerOf: p.ViewerOf}
	p.subs = subscriptions.New(func(ctx context.Context, c *child.Server, method string, params map[string]any) error {
		_, err := p.requestPinned(ctx, nil, c, nil, method, params)
		return err
	}, p.child, d.Sessions, d.Log)
	p.rounds.idle = make(chan struct{}, 1)
	p.rounds.log = d.Log
	p.rounds.seal = d.SealState
	p.settings.Store(SettingsOf(d.Config))
	p.rounds.settings = &p.settings
	p.rounds.addCut = func(cut context.CancelCauseFunc) func() { return p.calls.cuts.add(p.calls.cut, cut) }
	p.rounds.unknown = p.audit.unknownStateRefused
	p.calls = Forwarder{settings: &p.settings, admit: &p.admit, child: p.child,
		inForce: func(alias string) *child.Server { return p.children.Load().InForce(alias) }, pinning: d.Pub.Pinning,
		observe: p.observe, tracing: d.Tracing, idle: make(chan struct{}, 1)}
	p.calls.cut, p.calls.cutCalls = context.WithCancelCause(context.Background())
	return p
}

// WaitReady waits until every child's first start is over, or ctx ends.
func (m *Pipeline) WaitReady(ctx context.Context) error {
	select {
	case <-m.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Calls are the calls in flight to the children.
func (m *Pipeline) Calls() *Forwarder { return &m.calls }

// Close ends the subscriptions' work still running and waits for the
// rounds' goroutines; the calls in flight were cut before (Calls().Cut).
func (m *Pipeline) Close() {
	m.subs.Close()
	m.rounds.wait()
}
