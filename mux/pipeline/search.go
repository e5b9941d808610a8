package pipeline

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/searchmode"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Searching reports whether v sees cat through find_tools and call_tool
// (searchmode) under s.
func Searching(s *Settings, cat *catalog.Catalog, v catalog.Viewer) bool {
	return searchmode.Searching(s.Catalog, s.SearchAbove, v.Policy, func() int { return len(cat.Listed(catalog.KindTool, v).Entries) })
}

// ToolList is the tools array of v's tools/list of cat in one page, in
// either catalog mode: what the announcer compares to tell a change.
func (m *Pipeline) ToolList(cat *catalog.Catalog, v catalog.Viewer) []byte {
	if Searching(m.settings.Load(), cat, v) {
		return m.own.List(cat.Listed(catalog.KindTool, v).Entries, v.Policy)
	}
	return cat.List(catalog.KindTool, v)
}

// serveOwn answers a call of find_tools or call_tool, by a caller in
// search mode. A call through call_tool is served as a direct call of the
// tool it names, in every step, its audit line under that tool's name.
func (m *Pipeline) serveOwn(ctx context.Context, r *upstream.Request) answer {
	begun := time.Now()
	args := []byte(r.Params.Arguments)
	rec := CallRecord{Identity: upstream.IdentityFrom(ctx), Tool: r.Params.Name, Server: config.ReservedAlias,
		Decision: DecisionAllowed, Outcome: OutcomeOK}
	refuse := func(err error) answer {
		rec.Decision, rec.Outcome = DecisionInvalid, OutcomeRefused
		m.audit.done(ctx, rec, begun)
		return ownResult(mcp.NewToolResultError(err.Error()))
	}
	if r.Params.Name == m.own.Call {
		target, err := m.own.ParseTarget(args)
		if err != nil {
			return refuse(err)
		}
		inner := *r
		inner.Params.Name, inner.Params.Arguments = target.Name, target.Arguments
		return m.serveCall(ctx, &inner)
	}
	q, err := searchmode.ParseQuery(args)
	if err != nil {
		return refuse(err)
	}
	found := m.catalog.Load().Search(q.Query, q.Limit, q.Server, m.ViewerOf(ctx))
	m.audit.done(ctx, rec, begun)
	return answer{Result: searchmode.Found(found)}
}
