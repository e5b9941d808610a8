package mux

import (
	"context"
	"io"
	"time"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/searchmode"
	"github.com/mcpmux/mcpmux/mux/tasks"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// ServeStdio serves one client over in and out as identity until in ends or
// ctx is done (edge.ServeStdio).
func (m *Mux) ServeStdio(ctx context.Context, identity string, in io.Reader, out io.Writer) error {
	return edge.ServeStdio(ctx, m.edgeEnv(), identity, in, out)
}

// NewHTTPUpstream builds the streamable HTTP upstream (edge.NewHTTPUpstream).
// A Mux has at most one.
func (m *Mux) NewHTTPUpstream(o edge.HTTPOptions) *edge.HTTPUpstream {
	return edge.NewHTTPUpstream(m.edgeEnv(), o)
}

// edgeEnv is what the Mux gives its edges.
func (m *Mux) edgeEnv() edge.Env {
	return edge.Env{
		Backend:         edgeBackend{m},
		MCP:             m.srv,
		Sessions:        &m.sessions,
		Log:             m.log,
		Drain:           func() time.Duration { return m.p.Settings().CallTimeout + m.maxStartupTimeout() },
		MaxMessageBytes: m.cfg.Limits.MaxMessageBytes,
		Tracing:         m.tracing,
	}
}

// edgeBackend is the Mux as the backend of its edges (edge.Backend).
type edgeBackend struct{ m *Mux }

func (b edgeBackend) Serve(ctx context.Context, r *upstream.Request) ([]byte, *frame.Error) {
	return b.m.p.Serve(ctx, r)
}

func (b edgeBackend) TaskResult(u *upstream.Session, f *frame.Frame) func(context.Context, upstream.Out) []byte {
	if answer := b.m.tasks.Foreign(u, f); answer != nil {
		return func(ctx context.Context, _ upstream.Out) []byte { return answer(ctx) }
	}
	t := b.m.tasks.ResultOf(u, f)
	if t == nil {
		return nil
	}
	return func(ctx context.Context, out upstream.Out) []byte { return b.m.tasks.ServeResult(ctx, u, out, f, t) }
}

func (b edgeBackend) Catalog() *catalog.Catalog { return b.m.catalog.Load() }

func (b edgeBackend) TaskCall(ctx context.Context, f *frame.Frame, p frame.Params) ([]byte, bool) {
	cat := b.m.catalog.Load()
	searching := func() bool { return pipeline.Searching(b.m.p.Settings(), cat, b.m.p.ViewerOf(ctx)) }
	tool, args, ok := tasks.Route(cat, searchmode.For(b.m.cfg.Mux.Separator), searching, p.Name, p.Arguments)
	if !ok || tool == p.Name {
		return nil, ok
	}
	hand, err := tasks.DirectCall(f.Raw, tool, args)
	return hand, err == nil
}
