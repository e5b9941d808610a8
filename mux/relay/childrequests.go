package relay

// Requests a child makes of its client (sampling/createMessage,
// elicitation/create, roots/list) are relayed to the client of the call
// they belong to, on that call's own stream (requestOut.ask), and the
// client's answer goes back to the child, both as they were sent.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/pipeline"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Request answers a request c's session sess sent: ping itself, the
// three client requests by relaying them, anything else with "method not
// found".
func (m *Relay) Request(ctx context.Context, c *child.Server, sess *child.Session, req transport.JSONRPCRequest) *transport.JSONRPCResponse {
	fail := func(code int, format string, args ...any) *transport.JSONRPCResponse {
		return transport.NewJSONRPCErrorResponse(req.ID, code, fmt.Sprintf(format, args...), nil)
	}
	switch mcp.MCPMethod(req.Method) {
	case mcp.MethodPing:
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`))
	case mcp.MethodSamplingCreateMessage, mcp.MethodElicitationCreate, mcp.MethodListRoots:
	default:
		return fail(mcp.METHOD_NOT_FOUND, "mcpmux does not relay %s from a server", req.Method)
	}
	call, err := sess.Attribute(ctx)
	if err != nil {
		return fail(mcp.INVALID_REQUEST, "mcpmux cannot tell which client %s is for: %v", req.Method, err)
	}
	var to *upstream.Attachment
	switch {
	case call != nil && call.Round() != nil:
		// A 2026-07-28 client's: the round hands it out (rounds.go).
		return call.Round().Ask(ctx, c, req)
	case call != nil:
		to = m.tasks.AskVia(ctx, call) // a task's run: tasks.go
		// What the child sent before the request goes first.
		call.Flush()
	default:
		// Outside any call: the stdio client is the one client there is,
		// once it has its initialize answer.
		u := m.sessions.Stdio()
		if u != nil && u.Answered() && seesAlias(m.policies.Current().For(u.Identity), m.catalog.Load(), c.Alias()) {
			to = &upstream.Attachment{Ctx: upstream.WithIdentity(context.Background(), u.Identity), Sess: u, Out: u.Out()}
			break
		}
		switch {
		case req.Method == string(mcp.MethodListRoots) && len(c.Config().Roots) > 0:
			return pipeline.ConfiguredRoots(req.ID, c)
		case req.Method == string(mcp.MethodListRoots):
			// An empty list would be taken for the client's answer, and
			// kept (server-everything asks once per session); the child
			// may ask again in a call, where a client can be asked.
			return fail(mcp.INVALID_REQUEST, "%s outside any call: no client can be asked now, and [servers.%s] roots is not set", req.Method, c.Alias())
		case u != nil && !u.Answered():
			return fail(mcp.INVALID_REQUEST, "%s outside any call: the client has not finished its handshake", req.Method)
		}
		return fail(mcp.INVALID_REQUEST, "%s outside any call: over HTTP mcpmux cannot tell which client to ask", req.Method)
	}
	if missing := pipeline.MissingCapability(to, mcp.MCPMethod(req.Method)); missing != "" {
		return pipeline.RefuseMissing(req, c, missing)
	}
	if to.Out == nil {
		return fail(mcp.INTERNAL_ERROR, "the client did not answer %s: %v", req.Method, upstream.ErrNoAsk)
	}
	params, err := pipeline.ChildParams(req)
	if err != nil {
		return fail(mcp.INVALID_PARAMS, "%v", err)
	}
	// The request lasts while both the call and the child's wait for it do,
	// and at most the call timeout.
	rctx, cancel := context.WithTimeout(to.Ctx, m.p.Settings().CallTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	span := telemetry.Relayed(to.Ctx, req.Method, c.Alias())
	result, err := to.Out.Ask(rctx, req.Method, params)
	var fe *frame.Error
	if span != nil {
		et := ""
		if errors.As(err, &fe) {
			et = telemetry.OperationErrorType(fe.Code, false)
		} else if err != nil {
			et = "_OTHER"
		}
		telemetry.EndClient(span, et, err)
	}
	switch {
	case errors.As(err, &fe):
		// The client's own refusal goes to the child as it is.
		return transport.NewJSONRPCErrorResponse(req.ID, fe.Code, fe.Message, frame.RawData(fe.Data))
	case err != nil:
		return fail(mcp.INTERNAL_ERROR, "the client did not answer %s: %v", req.Method, err)
	}
	return transport.NewJSONRPCResultResponse(req.ID, result)
}

// rootsChanged passes a client's notifications/roots/list_changed on to
// every ready child that was told mcpmux relays roots, each within a
// second.
func (m *Relay) rootsChanged(ctx context.Context, _ mcp.JSONRPCNotification) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range m.children.Load().List() {
		sess := c.State().Session
		if sess == nil || sess.Lost() {
			continue
		}
		wg.Go(func() {
			if err := sess.TellRootsChanged(ctx); err != nil {
				c.Log().Warn().Err(err).Msg("could not pass on notifications/roots/list_changed")
			}
		})
	}
	wg.Wait()
}

// addChildTraffic adds the hook that passes logging/setLevel on to the
// children.
func (m *Relay) addChildTraffic(hooks *server.Hooks) {
	hooks.AddAfterSetLevel(m.afterSetLevel)
}

// addClientNotifications registers the client notifications relayed to
// children.
func (m *Relay) addClientNotifications(srv *server.MCPServer) {
	srv.AddNotificationHandler(string(mcp.MethodNotificationRootsListChanged), m.rootsChanged)
	srv.AddNotificationHandler(string(mcp.MethodNotificationInitialized), m.clientInitialized)
}

// clientInitialized tells the children that the roots changed once the
// stdio client, which declared roots, has finished its handshake: a child
// that asked for roots/list while no client was there (mcpmux starts the
// children first) then asks again, and gets the client's.
func (m *Relay) clientInitialized(ctx context.Context, n mcp.JSONRPCNotification) {
	cs := server.ClientSessionFromContext(ctx)
	if u := m.sessions.Stdio(); cs == nil || u == nil || u.MCP() != cs || u.ClientCaps().Roots == nil {
		return
	}
	m.rootsChanged(ctx, n)
}
