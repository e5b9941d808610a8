package mux

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/policy"
)

type identityKey struct{}

// WithIdentity returns a context that carries the caller's authenticated
// identity. Identity never comes from the request body.
func WithIdentity(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, identityKey{}, identity)
}

// IdentityFrom returns the identity WithIdentity stored, or "".
func IdentityFrom(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}

// newServer builds the upstream MCP server. mcp-go owns the protocol; the
// mux plugs in where it decides: which tools a caller sees (the filter), what
// a call does (the handler), and what happens around lists and refusals
// (hooks).
func (m *Mux) newServer() *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddBeforeListTools(m.beforeListTools)
	hooks.AddAfterListTools(m.afterListTools)
	hooks.AddBeforeCallTool(func(ctx context.Context, _ any, _ *mcp.CallToolRequest) {
		_ = m.WaitReady(ctx)
	})
	hooks.AddOnError(m.auditRefusal)
	// Every upstream session is recorded in m.sessions, the one place that
	// knows who holds it (see upstream_sessions.go).
	m.sessions.observe = m.observe.Session
	hooks.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		viaHTTP, _ := ctx.Value(httpRequestKey{}).(bool)
		m.sessions.registered(cs, IdentityFrom(ctx), viaHTTP)
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		m.sessions.unregistered(cs)
	})
	// A 2026-07-28 client listens with subscriptions/listen on a session
	// mcp-go never registers; the hooks around the request mark its life.
	hooks.AddBeforeSubscriptionsListen(func(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.addLocal(cs, IdentityFrom(ctx), kindListen)
		}
	})
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.unregistered(cs)
		}
	})
	return server.NewMCPServer("mcpmux", Version,
		server.WithToolCapabilities(true),
		server.WithToolFilter(m.filterTools),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
}

// filterTools is the access check mcp-go applies to tools/list and to every
// tools/call. It answers from the mux's own snapshot and in its order.
func (m *Mux) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	identity := IdentityFrom(ctx)
	p := m.policies.Current().For(identity)
	cat := m.catalog.Load()
	if len(tools) == 1 {
		// A call-time check: one tool, no order to keep.
		t, ok := cat.byName[tools[0].Name]
		if ok && p.Allows(t.name, t.readOnly) {
			return tools
		}
		return nil
	}
	out := make([]mcp.Tool, 0, len(cat.tools))
	for _, t := range m.visible(identity, cat) {
		out = append(out, t.def)
	}
	return out
}

// handleCall is the handler of every exposed tool.
func (m *Mux) handleCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args any = req.Params.Arguments
	if len(req.Params.RawArguments) > 0 {
		args = req.Params.RawArguments
	}
	r := m.CallTool(ctx, IdentityFrom(ctx), req.Params.Name, args)
	if r.Tool == nil {
		// Only when the catalog or policy changed between mcp-go's check and
		// this one.
		return mcp.NewToolResultError(ErrUnknownTool.Error() + ": " + req.Params.Name), nil
	}
	return r.Tool, nil
}

// auditRefusal writes the audit line for calls mcp-go refused before they
// reached the handler: names outside the registry or the caller's policy.
func (m *Mux) auditRefusal(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	if method == mcp.MethodSubscriptionsListen {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.unregistered(cs)
		}
		return
	}
	if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	req, ok := message.(*mcp.CallToolRequest)
	if !ok {
		return
	}
	// Re-running the look-up classifies the refusal for the log.
	m.classifyRefusal(ctx, req.Params.Name)
}

func (m *Mux) classifyRefusal(ctx context.Context, name string) {
	cat := m.catalog.Load()
	identity := IdentityFrom(ctx)
	if t, ok := cat.byName[name]; ok {
		m.done(CallRecord{Identity: identity, Tool: t.name, Server: t.child.alias, Decision: DecisionDenied, Outcome: OutcomeRefused}, time.Now())
		return
	}
	m.refused(identity, name, cat, time.Now())
}

// Paging. mcp-go pages by name order; the mux keeps catalog order, so with
// page_size set it cuts the pages itself after mcp-go built the full list.

const cursorPrefix = "mcpmux:"

func encodeCursor(offset int) string {
	return base64.StdEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(offset)))
}

func decodeCursor(c string) (int, bool) {
	b, err := base64.StdEncoding.DecodeString(c)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), cursorPrefix))
	return n, err == nil && n >= 0
}

// invalidCursor is not base64, so mcp-go answers -32602 for it.
const invalidCursor = "!"

func (m *Mux) beforeListTools(ctx context.Context, _ any, req *mcp.ListToolsRequest) {
	_ = m.WaitReady(ctx)
	if c := req.Params.Cursor; c != "" {
		if _, ok := decodeCursor(string(c)); !ok || m.cfg.Mux.PageSize == 0 {
			req.Params.Cursor = invalidCursor
		}
	}
}

func (m *Mux) afterListTools(ctx context.Context, _ any, req *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
	size := m.cfg.Mux.PageSize
	if size == 0 || res == nil {
		return
	}
	all := m.filterTools(ctx, nil)
	start, _ := decodeCursor(string(req.Params.Cursor))
	start = min(start, len(all))
	end := min(start+size, len(all))
	res.Tools = all[start:end]
	res.NextCursor = ""
	if end < len(all) {
		res.NextCursor = mcp.Cursor(encodeCursor(end))
	}
}

// PolicyChanged tells the sessions of every identity whose visible tools
// changed between old and new that their tool list changed.
func (m *Mux) PolicyChanged(old, new *policy.Set) {
	cat := m.catalog.Load()
	affected := map[string]bool{}
	for _, id := range policy.Changed(old, new) {
		if !slices.Equal(visibleTo(old.For(id), cat), visibleTo(new.For(id), cat)) {
			affected[id] = true
		}
	}
	if len(affected) == 0 {
		return
	}
	for _, cs := range m.sessions.of(affected) {
		if f, ok := cs.(server.SessionWithSubscriptionFilter); ok {
			if filter, active := f.SubscriptionFilter(); active && !filter.ToolsListChanged {
				continue // a listener that did not ask for these
			}
		}
		ctx := m.srv.WithContext(context.Background(), cs)
		if err := m.srv.SendNotificationToClient(ctx, mcp.MethodNotificationToolsListChanged, nil); err != nil {
			m.log.Warn().Err(err).Str("session", cs.SessionID()).Msg("could not send tools/list_changed")
		}
	}
}
