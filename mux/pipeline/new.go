// Package pipeline is the one request pipeline of both edges: a request
// mcpmux answers itself (tools/call, prompts/get, resources/read,
// completion/complete, the lists, resource subscriptions, of both protocol
// eras) goes through its steps in order (admission and rate limit, look-up
// in the snapshot, policy, rules and pins, argument check, the child, the
// answer, audit) and is answered with bytes, a child's result relayed as
// the child sent it with only the id and the URIs rewritten.
//
// It owns what those steps hold across requests: the per-child slots and
// per-identity rate limits (admission.go), the calls in flight and their
// cuts (call.go), a 2026-07-28 client's rounds waiting for its retry
// (rounds.go) and the resource subscriptions (subscriptions.go).
package pipeline

import (
	"context"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"

	"github.com/mark3labs/mcp-go/mcp"
)

// Pipeline serves the requests mcpmux answers itself.
type Pipeline struct {
	cfg      *config.Config
	policies *policy.Store
	log      zerolog.Logger
	audit    zerolog.Logger
	observe  Observer

	children []*child.Server // config order
	byAlias  map[string]*child.Server
	catalog  *atomic.Pointer[catalog.Catalog]
	pub      *publish.Publisher
	sessions *upstream.Registry
	ready    <-chan struct{} // closed once every child's first start is over

	decoration decorator
	subs       subscriptions
	rounds     roundTable // 2026-07-28 calls waiting for input (rounds.go)
	admit      admission  // rate limits and max_in_flight (admission.go)
	inflight   atomic.Int64
	idle       chan struct{} // gets a token when inflight drops to zero
	// cut ends every call in flight when mcpmux stops (CutCalls). Calls
	// watch it themselves: cancelling the transports' request contexts
	// instead would stop mcp-go from sending the answers.
	cut      context.Context
	cutCalls context.CancelCauseFunc
	cuts     callCuts // the calls in flight, reached by cut (call.go)
}

// Deps are what a Pipeline serves from.
type Deps struct {
	Config   *config.Config
	Policies *policy.Store
	Log      zerolog.Logger
	Observer Observer // nil observes nothing
	Children []*child.Server
	Catalog  *atomic.Pointer[catalog.Catalog]
	Pub      *publish.Publisher
	Sessions *upstream.Registry
	// Ready is closed once every child's first start is over: the lists
	// wait for it.
	Ready <-chan struct{}
	// Version is mcpmux's, named in every 2026-07-28 result.
	Version string
}

// New returns the pipeline of d.
func New(d Deps) *Pipeline {
	p := &Pipeline{
		cfg: d.Config, policies: d.Policies, log: d.Log, observe: d.Observer,
		audit:    d.Log.With().Str("log", "audit").Logger(),
		children: d.Children, byAlias: map[string]*child.Server{},
		catalog: d.Catalog, pub: d.Pub, sessions: d.Sessions, ready: d.Ready,
		decoration: decorator{frame.Decoration{Server: mcp.Implementation{Name: "mcpmux", Version: d.Version}}},
		idle:       make(chan struct{}, 1),
	}
	if p.observe == nil {
		p.observe = NopObserver{}
	}
	for _, c := range d.Children {
		p.byAlias[c.Alias()] = c
	}
	p.rounds.idle = make(chan struct{}, 1)
	p.rounds.log = d.Log
	p.cut, p.cutCalls = context.WithCancelCause(context.Background())
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

// Close ends the subscriptions' work still running and waits for the
// rounds' goroutines; the calls in flight were cut before (CutCalls).
func (m *Pipeline) Close() {
	m.subs.close()
	m.rounds.wait()
}
