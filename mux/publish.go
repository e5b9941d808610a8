package mux

import (
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
)

// publisher builds the merged catalog from what the children list and
// publishes it; one build at a time.
type publisher struct {
	mu        sync.Mutex // serialises builds; never taken by calls
	children  []*child.Server
	pinning   *pinning // nil when pinning is off (pinning.go)
	catalog   *atomic.Pointer[catalog.Catalog]
	announcer *announcer // tells upstream of each catalog and policy change (announcer.go)
	log       zerolog.Logger
}

// rebuild merges what every child lists now and publishes it; the
// announcer then tells each upstream session whose view changed.
func (p *publisher) rebuild() { p.rebuildThen(nil) }

// rebuildThen is rebuild, calling published (if not nil)
// once the new snapshot is published and mcp-go and the sessions are told,
// on the announcer's goroutine. The build's first-sight pins are written to
// the pin file after publishMu is let go, as is reading the pins' fields
// for a log line.
func (p *publisher) rebuildThen(published func()) {
	p.mu.Lock()
	work := p.publish(published)
	if p.pinning == nil {
		p.mu.Unlock()
		return
	}
	p.pinning.io.Lock()
	p.mu.Unlock()
	defer p.pinning.io.Unlock()
	work.do(p.pinning)
}

// publish builds the catalog and publishes it, under mu; it returns the
// pin file work left (applyPins).
func (p *publisher) publish(published func()) pinWork {
	parts := make([]catalog.Part, 0, len(p.children))
	for _, c := range p.children {
		if listed := c.State().Listed; listed != nil {
			parts = append(parts, catalog.Part{Alias: c.Alias(), Listed: listed, Log: *c.Log()})
		}
	}
	next := catalog.Merge(parts)
	work := p.pinning.applyPins(next, p.children)
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
	p.announcer.changed(published)
	return work
}

// registerTaskTools tells srv the tools of the snapshot that may run as
// tasks, so that it creates the tasks of a 2025-11-25 client's
// task-augmented calls of them and runs handle for each. Every other
// request naming a tool mcpmux answers itself, from the snapshot.
func registerTaskTools(srv *server.MCPServer, cat *catalog.Catalog, handle server.ToolHandlerFunc) {
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
