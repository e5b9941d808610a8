package mux

import (
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/catalog"
)

// rebuildCatalog merges what every child lists now and publishes it; the
// announcer then tells each upstream session whose view changed.
func (m *Mux) rebuildCatalog() { m.rebuildCatalogThen(nil) }

// rebuildCatalogThen is rebuildCatalog, calling published (if not nil)
// once the new snapshot is published and mcp-go and the sessions are told,
// on the announcer's goroutine. The build's first-sight pins are written to
// the pin file after publishMu is let go, as is reading the pins' fields
// for a log line.
func (m *Mux) rebuildCatalogThen(published func()) {
	m.publishMu.Lock()
	work := m.publishCatalog(published)
	if m.pinning == nil {
		m.publishMu.Unlock()
		return
	}
	m.pinning.io.Lock()
	m.publishMu.Unlock()
	defer m.pinning.io.Unlock()
	work.do(m.pinning)
}

// publishCatalog builds the catalog and publishes it, under publishMu; it
// returns the pin file work left (applyPins).
func (m *Mux) publishCatalog(published func()) pinWork {
	parts := make([]catalog.Part, 0, len(m.children))
	for _, c := range m.children {
		if listed := c.State().Listed; listed != nil {
			parts = append(parts, catalog.Part{Alias: c.Alias(), Listed: listed, Log: *c.Log()})
		}
	}
	next := catalog.Merge(parts)
	work := m.pinning.applyPins(next, m.children)
	next.Seal()
	prev := m.catalog.Load()
	// The new snapshot is stored even when nothing listed changed: it holds
	// a new child generation's schemas and the current hidden names.
	m.catalog.Store(next)
	if len(catalog.ChangedKinds(prev, next)) > 0 {
		m.log.Info().Int("tools", len(next.Kinds[catalog.KindTool].List)).Int("prompts", len(next.Kinds[catalog.KindPrompt].List)).
			Int("resources", len(next.Kinds[catalog.KindResource].List)).Int("resource_templates", len(next.Kinds[catalog.KindTemplate].List)).
			Msg("catalog changed")
	}
	m.announcer.changed(published)
	return work
}

// registerWithServer tells mcp-go the tools of the snapshot that may run
// as tasks, so that it creates the tasks of a 2025-11-25 client's
// task-augmented calls of them and runs handleTask for each. Every other
// request naming a tool mcpmux answers itself, from the snapshot.
func (m *Mux) registerWithServer(cat *catalog.Catalog) {
	var tools []server.ServerTool
	for _, e := range cat.Kinds[catalog.KindTool].List {
		if e.Task == "" {
			continue
		}
		tools = append(tools, server.ServerTool{
			Tool:    mcp.Tool{Name: e.Name, InputSchema: mcp.ToolInputSchema{Type: "object"}, Execution: execution(e.Task)},
			Handler: m.handleTask,
		})
	}
	m.srv.SetTools(tools...)
}

// execution is the Execution of a tool's stub registered with mcp-go,
// which decides whether a task-augmented call runs as a task.
func execution(task mcp.TaskSupport) *mcp.ToolExecution {
	if task == "" {
		return nil
	}
	return &mcp.ToolExecution{TaskSupport: task}
}
