package relay

import (
	"context"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// newServer builds mcp-go's MCP server, to which the front end hands
// what mcpmux does not answer itself (package edge): the handshake
// (initialize, server/discover, notifications/initialized), ping,
// logging/setLevel, the task store (task-augmented tools/call of a
// 2025-11-25 client, tasks/get, tasks/list, tasks/cancel), a 2026-07-28
// client's subscriptions/listen stream, the client's other notifications,
// and whatever mcpmux does not act on (a message that is not one it
// reads, a method it does not know). Its hooks are where mcpmux learns
// what those requests establish: what a session's client is and asked for
// (its capabilities, its log level), and when sessions begin and end.
//
// Only tools that run as tasks are registered with mcp-go, so that it
// creates their tasks; what it announces of them is dropped at the edges,
// and mcpmux tells each session itself, only when the lists that session
// sees changed (notify).
func (m *Relay) newServer() *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(m.afterInitialize)
	m.tasks.AddHooks(hooks)
	hooks.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		m.awaitFirstStart(ctx, mcp.MethodServerDiscover)
		m.declare(&res.Capabilities)
		res.Instructions = m.instructionsFor(ctx)
	})
	hooks.AddBeforeCallTool(func(ctx context.Context, _ any, _ *mcp.CallToolRequest) {
		_ = m.p.WaitReady(ctx)
	})
	hooks.AddOnError(m.auditRefusal)
	m.addChildTraffic(hooks)
	// Every upstream session is recorded in m.sessions, the one place that
	// knows who holds it (package upstream).
	m.sessions.Observe = m.observe.Session
	hooks.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		m.sessions.Registered(cs, upstream.IdentityFrom(ctx))
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		m.sessions.Unregistered(cs)
	})
	// A 2026-07-28 client listens with subscriptions/listen on a session
	// mcp-go never registers; the hooks around the request mark its life.
	hooks.AddBeforeSubscriptionsListen(func(ctx context.Context, _ any, req *mcp.SubscriptionsListenRequest) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			u := m.sessions.OpenListen(cs, upstream.IdentityFrom(ctx))
			m.p.ListenSubscriptions(ctx, u, req.Params.Notifications.ResourceSubscriptions)
		}
	})
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.CloseListen(cs)
		}
	})
	m.traceHandedOff(hooks) // last: it ends spans after the other hooks' work
	opts := []server.ServerOption{
		// Every list may change, and resources be subscribed to: mcp-go
		// establishes for a subscriptions/listen stream only what its own
		// capabilities declare. What it announces of its own is dropped at
		// the edges (upstream.Announcement).
		server.WithToolCapabilities(true),
		server.WithPromptCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithLogging(),
		// What initialize declares of tasks is declare's; mcp-go answers
		// tasks/* only with the option set.
		server.WithTaskCapabilities(true, true, true),
		server.WithTaskHooks(m.tasks.Hooks()),
		server.WithToolFilter(m.FilterTools),
		server.WithHooks(hooks),
		server.WithRecovery(),
	}
	if m.tracing != nil {
		opts = append(opts, server.WithMetaPropagator(telemetry.MetaPropagator{}))
	}
	srv := server.NewMCPServer("mcpmux", m.version, opts...)
	m.addClientNotifications(srv)
	return srv
}

// afterInitialize declares what the children together offer, once their
// first start is over, and that every list may change; server/discover
// (2026-07-28) declares the same. When the session begins to receive
// mcpmux's notifications is the edge's to say, as it writes this answer
// (upstream.Session.MarkAnswered).
func (m *Relay) afterInitialize(ctx context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
	m.awaitFirstStart(ctx, mcp.MethodInitialize)
	m.declare(&res.Capabilities)
	res.Capabilities.Tasks = m.catalog.Load().Caps.Tasks
	res.Instructions = m.instructionsFor(ctx)
}

// instructionsFor returns the instructions of the children the caller of
// ctx may see anything of, in config order, each in a section headed by
// its alias ("## docs"), the sections apart by a blank line; "" when none
// of them has any.
func (m *Relay) instructionsFor(ctx context.Context) string {
	cat, p := m.catalog.Load(), m.p.PolicyFor(ctx)
	var b strings.Builder
	for _, in := range cat.Instructions {
		if !seesAlias(p, cat, in.Alias) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## " + in.Alias + "\n\n" + in.Text)
	}
	return b.String()
}

// awaitFirstStart is WaitReady for the handshake request method, which
// says in the log that it waits when the children's first start is not
// over.
func (m *Relay) awaitFirstStart(ctx context.Context, method mcp.MCPMethod) {
	select {
	case <-m.ready:
		return
	default:
	}
	m.log.Info().Ctx(ctx).Str("identity", upstream.IdentityFrom(ctx)).Str("method", string(method)).
		Msg("the client's handshake waits for the servers' first start")
	_ = m.p.WaitReady(ctx)
}

// declare sets caps to what the mux offers now.
func (m *Relay) declare(caps *mcp.ServerCapabilities) {
	offered := m.catalog.Load().Caps
	caps.Tools = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{ListChanged: true}
	caps.Prompts, caps.Resources = nil, nil
	if offered.Prompts != nil {
		caps.Prompts = &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{ListChanged: true}
	}
	if offered.Resources != nil {
		caps.Resources = &struct {
			Subscribe   bool `json:"subscribe,omitempty"`
			ListChanged bool `json:"listChanged,omitempty"`
		}{Subscribe: offered.Resources.Subscribe, ListChanged: true}
	}
	caps.Logging = offered.Logging
	caps.Completions = offered.Completions
	// Tasks cross in 2025-11-25 only (see tasks.go): afterInitialize
	// declares them.
	caps.Tasks = nil
}

// FilterTools is the access check mcp-go applies to every tools/call (one
// tool): the policy, and the rules that ignore the arguments. Lists are
// answered from the mux's own snapshot (listPayload), so mcp-go's list is
// left empty.
func (m *Relay) FilterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if len(tools) != 1 {
		return nil
	}
	if e, ok := m.catalog.Load().Lookup(catalog.KindTool, tools[0].Name); ok && m.p.ViewerOf(ctx).Sees(e) {
		return tools
	}
	return nil
}

// auditRefusal writes the audit line of a task-augmented tools/call (the
// one request mcp-go answers that names a tool) that mcp-go refused before
// its handler: a name outside the registry or the caller's policy.
func (m *Relay) auditRefusal(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	if method == mcp.MethodSubscriptionsListen {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.CloseListen(cs)
		}
		return
	}
	if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	if req, ok := message.(*mcp.CallToolRequest); ok {
		// Re-running the look-up classifies the refusal for the log.
		m.p.Audit().ClassifyRefusal(ctx, req.Params.Name)
	}
}
