// Package relay carries what passes between the clients and the children
// outside the requests the pipeline answers: a child's log messages,
// progress and requests of a client, relayed to the client of the call
// they belong to; the client's log level and notifications (initialized,
// roots changed), passed on to the children; and mcp-go's server, whose
// hooks see the handshake, the task store and the session's life.
package relay

import (
	"sync/atomic"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/tasks"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Relay is mcp-go's server as mcpmux uses it, and the relay of the
// children's traffic to their clients.
type Relay struct {
	cfg      *config.Config
	policies *policy.Store
	log      zerolog.Logger
	observe  pipeline.Observer
	version  string

	children *atomic.Pointer[child.Set] // the server list in force
	catalog  *atomic.Pointer[catalog.Catalog]
	sessions *upstream.Registry
	p        *pipeline.Pipeline
	tasks    *tasks.Table
	ready    <-chan struct{} // closed once every child's first start is over

	// deliver is notifyCall, bound once: what a child sends during a call
	// reaches the call's client through it.
	deliver  child.Deliver
	levelSet atomic.Bool // a client has sent logging/setLevel (logging.go)
	srv      *server.MCPServer
	tracing  *telemetry.Tracing // nil: off
}

// Deps are what a Relay relays between.
type Deps struct {
	Config   *config.Config
	Policies *policy.Store
	Log      zerolog.Logger
	Observer pipeline.Observer
	Version  string // mcpmux's, named to clients
	Children *atomic.Pointer[child.Set]
	Catalog  *atomic.Pointer[catalog.Catalog]
	Sessions *upstream.Registry
	Pipeline *pipeline.Pipeline
	Tasks    *tasks.Table
	Tracing  *telemetry.Tracing // nil: off
	// Ready is closed once every child's first start is over: the
	// handshake waits for it.
	Ready <-chan struct{}
}

// New returns the relay of d, with its mcp-go server built; the sessions
// and the task table are handed that server.
func New(d Deps) *Relay {
	m := &Relay{cfg: d.Config, policies: d.Policies, log: d.Log, observe: d.Observer, version: d.Version,
		children: d.Children, catalog: d.Catalog, sessions: d.Sessions, p: d.Pipeline, tasks: d.Tasks, ready: d.Ready, tracing: d.Tracing}
	if m.observe == nil {
		m.observe = pipeline.NopObserver{}
	}
	m.deliver = m.notifyCall
	m.srv = m.newServer()
	m.sessions.UseServer(m.srv)
	m.tasks.UseServer(m.srv)
	return m
}

// Server is the mcp-go server that handles what mcpmux leaves to it.
func (m *Relay) Server() *server.MCPServer { return m.srv }
