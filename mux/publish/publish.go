package publish

import (
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
)

// Publisher builds the merged catalog from what the children list and
// publishes it to catalog; one build at a time. Its Announcer tells
// upstream what changed.
type Publisher struct {
	mu       sync.Mutex                 // serialises builds; never taken by calls
	children *atomic.Pointer[child.Set] // the server list in force
	// pinning is read by calls (held names), never under mu; nil when
	// pinning is off (pinning.go).
	pinning   atomic.Pointer[Pinning]
	catalog   *atomic.Pointer[catalog.Catalog]
	announcer *Announcer // tells upstream of each catalog and policy change (announcer.go)
	log       zerolog.Logger
}

// New returns the publisher of the catalog of children, pinned by pinning
// (nil: pinning is off), announced by announcer.
func New(children *atomic.Pointer[child.Set], pinning *Pinning, cat *atomic.Pointer[catalog.Catalog], announcer *Announcer, log zerolog.Logger) *Publisher {
	p := &Publisher{children: children, catalog: cat, announcer: announcer, log: log}
	p.pinning.Store(pinning)
	return p
}

// Pinning is the pinning in force, nil when pinning is off.
func (p *Publisher) Pinning() *Pinning { return p.pinning.Load() }

// SetPinning puts pn in force from the next build on.
func (p *Publisher) SetPinning(pn *Pinning) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pinning.Store(pn)
}

// Announcer is what tells upstream of each change.
func (p *Publisher) Announcer() *Announcer { return p.announcer }

// Rebuild merges what every child lists now and publishes it; the
// announcer then tells each upstream session whose view changed.
func (p *Publisher) Rebuild() { p.RebuildThen(nil) }

// RebuildThen is rebuild, calling published (if not nil)
// once the new snapshot is published and mcp-go and the sessions are told,
// on the announcer's goroutine. The build's first-sight pins are written to
// the pin file after mu is let go, as is reading the pins' fields
// for a log line.
func (p *Publisher) RebuildThen(published func()) {
	p.mu.Lock()
	work := p.publish(published)
	pn := p.pinning.Load()
	if pn == nil {
		p.mu.Unlock()
		return
	}
	pn.io.Lock()
	p.mu.Unlock()
	defer pn.io.Unlock()
	work.do(pn)
}

// publish builds the catalog and publishes it, under mu; it returns the
// pin file work left (applyPins).
func (p *Publisher) publish(published func()) pinWork {
	children := p.children.Load().List()
	parts := make([]catalog.Part, 0, len(children))
	ready := make(map[string]bool, len(children))
	for _, c := range children {
		if listed := c.State().Listed; listed != nil {
			parts = append(parts, catalog.Part{Alias: c.Alias(), Listed: listed, Log: *c.Log()})
			ready[c.Alias()] = true
		}
	}
	next := catalog.Merge(parts)
	work := p.pinning.Load().applyPins(next, ready)
	next.Seal()
	prev := p.catalog.Load()
	// The new snapshot is stored even when nothing listed changed: it holds
	// a new child generation's schemas and the current hidden names.
	p.catalog.Store(next)
	if len(catalog.ChangedKinds(prev, next)) > 0 {
		p.log.Info().Int("tools", len(next.Kinds[catalog.KindTool].List)).Int("prompts", len(next.Kinds[catalog.KindPrompt].List)).
			Int("resources", len(next.Kinds[catalog.KindResource].List)).Int("resource_templates", len(next.Kinds[catalog.KindTemplate].List)).
			Msg("catalog changed")
	}
	p.announcer.Changed(published)
	return work
}

// RegisterTaskTools tells srv the tools of the snapshot that may run as
// tasks, so that it creates the tasks of a 2025-11-25 client's
// task-augmented calls of them and runs handle for each. Every other
// request naming a tool mcpmux answers itself, from the snapshot.
func RegisterTaskTools(srv *server.MCPServer, cat *catalog.Catalog, handle server.ToolHandlerFunc) {
	var tools []server.ServerTool
	for _, e := range cat.Kinds[catalog.KindTool].List {
		if e.Task == "" {
			continue
		}
		tools = append(tools, server.ServerTool{
			Tool:    mcp.Tool{Name: e.Name, InputSchema: mcp.ToolInputSchema{Type: "object"}, Execution: execution(e.Task)},
			Handler: handle,
		})
	}
	srv.SetTools(tools...)
}

// execution is the Execution of a tool's stub registered with mcp-go,
// which decides whether a task-augmented call runs as a task.
func execution(task mcp.TaskSupport) *mcp.ToolExecution {
	if task == "" {
		return nil
	}
	return &mcp.ToolExecution{TaskSupport: task}
}
