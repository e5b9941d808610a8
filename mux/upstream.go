package mux

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/naming"
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

type claimsKey struct{}

// WithCaller returns a context that carries the caller's authenticated
// identity and the claims of the JWT that named it (nil for any other
// credential), which policy rules may consult. The claims are never
// modified.
func WithCaller(ctx context.Context, identity string, claims map[string]any) context.Context {
	ctx = WithIdentity(ctx, identity)
	if claims != nil {
		ctx = context.WithValue(ctx, claimsKey{}, claims)
	}
	return ctx
}

// ClaimsFrom returns the claims WithCaller stored, or nil.
func ClaimsFrom(ctx context.Context) map[string]any {
	c, _ := ctx.Value(claimsKey{}).(map[string]any)
	return c
}

// newServer builds the upstream MCP server. mcp-go owns the protocol; the
// mux plugs in where it decides: which tools and prompts a caller may use
// (the filters), what a call, a prompt, a read or a completion does (the
// handlers), what every list holds (the after-list hooks, which relay the
// mux's own pre-encoded lists) and what the handshake declares.
//
// mcp-go announces every registration to every session; those
// announcements are dropped at the edge (see relay.go), and the mux tells
// each session itself, and only those whose view changed (notifyChanged).
func (m *Mux) newServer() *server.MCPServer {
	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(m.afterInitialize)
	m.addTaskHooks(hooks)
	hooks.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		m.awaitFirstStart(ctx, mcp.MethodServerDiscover)
		m.declare(&res.Capabilities)
		res.Instructions = m.instructionsFor(ctx)
	})
	hooks.AddBeforeListTools(func(ctx context.Context, _ any, req *mcp.ListToolsRequest) {
		m.beforeList(ctx, &req.Params.Cursor)
	})
	hooks.AddAfterListTools(func(ctx context.Context, _ any, req *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		res.Tools = nil
		relayInto(res, m.listPayload(ctx, kindTool, req.Params.Cursor))
	})
	hooks.AddBeforeListPrompts(func(ctx context.Context, _ any, req *mcp.ListPromptsRequest) {
		m.beforeList(ctx, &req.Params.Cursor)
	})
	hooks.AddAfterListPrompts(func(ctx context.Context, _ any, req *mcp.ListPromptsRequest, res *mcp.ListPromptsResult) {
		res.Prompts = nil
		relayInto(res, m.listPayload(ctx, kindPrompt, req.Params.Cursor))
	})
	hooks.AddBeforeListResources(func(ctx context.Context, _ any, req *mcp.ListResourcesRequest) {
		m.beforeList(ctx, &req.Params.Cursor)
	})
	hooks.AddAfterListResources(func(ctx context.Context, _ any, req *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		res.Resources = nil
		relayInto(res, m.listPayload(ctx, kindResource, req.Params.Cursor))
	})
	hooks.AddBeforeListResourceTemplates(func(ctx context.Context, _ any, req *mcp.ListResourceTemplatesRequest) {
		m.beforeList(ctx, &req.Params.Cursor)
	})
	hooks.AddAfterListResourceTemplates(func(ctx context.Context, _ any, req *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		res.ResourceTemplates = nil
		relayInto(res, m.listPayload(ctx, kindTemplate, req.Params.Cursor))
	})
	hooks.AddBeforeCallTool(func(ctx context.Context, _ any, _ *mcp.CallToolRequest) {
		_ = m.WaitReady(ctx)
	})
	hooks.AddBeforeGetPrompt(func(ctx context.Context, _ any, _ *mcp.GetPromptRequest) {
		_ = m.WaitReady(ctx)
	})
	hooks.AddBeforeReadResource(func(ctx context.Context, _ any, req *mcp.ReadResourceRequest) {
		_ = m.WaitReady(ctx)
		carryUnmatched(req)
	})
	hooks.AddOnRequestInitialization(m.gateRequest)
	addRelayHooks(hooks)
	hooks.AddOnError(m.auditRefusal)
	m.addChildTraffic(hooks)
	// Every upstream session is recorded in m.sessions, the one place that
	// knows who holds it (see upstream_sessions.go).
	m.sessions.observe = m.observe.Session
	hooks.AddOnRegisterSession(func(ctx context.Context, cs server.ClientSession) {
		viaHTTP, _ := ctx.Value(httpRequestKey{}).(bool)
		m.sessions.registered(cs, IdentityFrom(ctx), viaHTTP)
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) {
		m.sessions.unregistered(cs)
		m.dropSubscriptions(cs)
		m.tasks.dropSession(cs)
	})
	// A 2026-07-28 client listens with subscriptions/listen on a session
	// mcp-go never registers; the hooks around the request mark its life.
	hooks.AddBeforeSubscriptionsListen(func(ctx context.Context, _ any, req *mcp.SubscriptionsListenRequest) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.addLocal(cs, IdentityFrom(ctx), kindListen)
			m.listenSubscriptions(ctx, cs, req.Params.Notifications.ResourceSubscriptions)
		}
	})
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.unregistered(cs)
			m.dropSubscriptions(cs)
		}
	})
	srv := server.NewMCPServer("mcpmux", Version,
		server.WithToolCapabilities(true),
		server.WithPromptCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithLogging(),
		server.WithCompletions(),
		// What initialize declares of tasks is declare's; mcp-go answers
		// tasks/* only with the option set.
		server.WithTaskCapabilities(true, true, true),
		server.WithTaskHooks(m.taskHooks()),
		server.WithPromptCompletionProvider(completer{m}),
		server.WithResourceCompletionProvider(completer{m}),
		server.WithToolFilter(m.filterTools),
		server.WithPromptFilter(m.filterPrompts),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
	// Every read reaches readResource, which routes it or answers that
	// the resource is unknown; the URIs themselves are never registered.
	// mcp-go routes a read by its templates' expressions, which match only
	// what a {+uri} expansion can hold: the rest (a space, a backslash, a
	// letter outside ASCII) is carried to readResource under unmatchedURI
	// (carryUnmatched), so that the children's own URIs are read and every
	// unknown URI is refused alike.
	srv.AddResourceTemplate(mcp.NewResourceTemplate("{+uri}", "any"), m.readResource)
	srv.AddResource(mcp.NewResource(unmatchedURI, "any"), func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		req.Params.URI, _ = req.Params.Arguments[unmatchedArg].(string)
		req.Params.Arguments = nil
		return m.readResource(ctx, req)
	})
	m.addClientNotifications(srv)
	return srv
}

// afterInitialize declares what the children together offer, once their
// first start is over, and that every list may change; server/discover
// (2026-07-28) declares the same.
//
// The session receives mcpmux's notifications only once this answer is
// written (sessions.answered): mcp-go marks it initialized before the
// hook runs, and a catalog published while the hook waits would otherwise
// be announced ahead of the answer. A catalog published before the answer
// is written needs no list_changed: the client lists after the answer.
func (m *Mux) afterInitialize(ctx context.Context, id any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
	m.awaitFirstStart(ctx, mcp.MethodInitialize)
	m.declare(&res.Capabilities)
	res.Capabilities.Tasks = m.catalog.Load().caps.Tasks
	res.Instructions = m.instructionsFor(ctx)
	cs := server.ClientSessionFromContext(ctx)
	key, ok := jsonwire.IDKey(id)
	w, watched := ctx.Value(answerWatchKey{}).(answerWatch)
	if cs == nil || !ok || !watched {
		return
	}
	identity, viaHTTP := IdentityFrom(ctx), ctx.Value(httpRequestKey{}) != nil
	w.afterAnswer(key, func() { m.sessions.answered(cs, identity, viaHTTP) })
}

// answerWatch is an edge that can run something once it has written the
// answer under an id (canonical, jsonwire.IDKey).
type answerWatch interface {
	afterAnswer(id string, f func())
}

type answerWatchKey struct{}

// withAnswerWatch returns ctx for the requests of the edge w.
func withAnswerWatch(ctx context.Context, w answerWatch) context.Context {
	return context.WithValue(ctx, answerWatchKey{}, w)
}

// instructionsFor returns the instructions of the children the caller of
// ctx may see anything of, in config order, each in a section headed by
// its alias ("## docs"), the sections apart by a blank line; "" when none
// of them has any.
func (m *Mux) instructionsFor(ctx context.Context) string {
	cat, p := m.catalog.Load(), m.policyFor(ctx)
	var b strings.Builder
	for _, in := range cat.instructions {
		if !seesAlias(p, cat, in.alias) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("## " + in.alias + "\n\n" + in.text)
	}
	return b.String()
}

// awaitFirstStart is WaitReady for the handshake request method, which
// says in the log that it waits when the children's first start is not
// over.
func (m *Mux) awaitFirstStart(ctx context.Context, method mcp.MCPMethod) {
	select {
	case <-m.initial:
		return
	default:
	}
	m.log.Info().Str("identity", IdentityFrom(ctx)).Str("method", string(method)).
		Msg("the client's handshake waits for the servers' first start")
	_ = m.WaitReady(ctx)
}

// declare sets caps to what the mux offers now.
func (m *Mux) declare(caps *mcp.ServerCapabilities) {
	offered := m.catalog.Load().caps
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

// policyFor returns the policy of the caller of ctx.
func (m *Mux) policyFor(ctx context.Context) *policy.Policy {
	return m.policies.Current().For(IdentityFrom(ctx))
}

// viewerOf returns the caller of ctx as its lists and tools are filtered.
func (m *Mux) viewerOf(ctx context.Context) viewer {
	v := viewer{p: m.policyFor(ctx)}
	if len(v.p.Rules()) > 0 {
		v.claims = ClaimsFrom(ctx)
	}
	return v
}

// filterTools is the access check mcp-go applies to every tools/call (one
// tool): the policy, and the rules that ignore the arguments. Lists are
// answered from the mux's own snapshot (listPayload), so mcp-go's list is
// left empty.
func (m *Mux) filterTools(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if len(tools) != 1 {
		return nil
	}
	if e, ok := m.catalog.Load().lookup(kindTool, tools[0].Name); ok && m.viewerOf(ctx).sees(e) {
		return tools
	}
	return nil
}

// filterPrompts is the access check mcp-go applies to prompts/get, over
// every registered prompt.
func (m *Mux) filterPrompts(ctx context.Context, prompts []mcp.Prompt) []mcp.Prompt {
	p, cat := m.policyFor(ctx), m.catalog.Load()
	out := prompts[:0:0]
	for _, pr := range prompts {
		if e, ok := cat.lookup(kindPrompt, pr.Name); ok && p.Allows(e.item()) {
			out = append(out, pr)
		}
	}
	return out
}

// handleCall is the handler of every exposed tool.
func (m *Mux) handleCall(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if t := m.tasks.begin(ctx); t != nil {
		return m.runTask(t, req)
	}
	ctx = withClientMeta(ctx, req.Params.Meta)
	name, args := req.Params.Name, callArguments(req)
	allowed := func() bool {
		t, ok := m.catalog.Load().lookup(kindTool, name)
		return ok && m.viewerOf(ctx).sees(t)
	}
	a, isRound := m.inRound(ctx, mcp.MethodToolsCall, name, req.Params.MultiRoundTripParams, allowed,
		func(ctx context.Context) (any, error) {
			return toolAnswer(m.CallTool(ctx, IdentityFrom(ctx), name, args), name), nil
		})
	switch {
	case !isRound:
		return toolAnswer(m.CallTool(ctx, IdentityFrom(ctx), name, args), name), nil
	case a.inputRequired != nil:
		return relayToolResult(a.inputRequired), nil
	case errors.Is(a.err, errUnknownState):
		return mcp.NewToolResultError(unknownState(mcp.MethodToolsCall)), nil
	case errors.Is(a.err, errRetryRefused):
		return mcp.NewToolResultError(ErrUnknownTool.Error() + ": " + name), nil
	}
	return a.value.(*mcp.CallToolResult), nil
}

// callArguments returns a call's arguments as CallTool takes them: as the
// client sent them when mcp-go kept the bytes.
func callArguments(req mcp.CallToolRequest) any {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments
	}
	return req.Params.Arguments
}

// toolAnswer is what a tools/call handler returns for r.
func toolAnswer(r Result, name string) *mcp.CallToolResult {
	switch {
	case r.Raw != nil:
		return relayToolResult(r.Raw)
	case r.Tool == nil:
		// Only when the catalog or policy changed between mcp-go's check and
		// this one.
		return mcp.NewToolResultError(ErrUnknownTool.Error() + ": " + name)
	}
	return r.Tool
}

// handlePrompt is the handler of every exposed prompt: mcp-go's filter has
// checked the policy.
func (m *Mux) handlePrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	begun := time.Now()
	ctx = withClientMeta(ctx, req.Params.Meta)
	name := req.Params.Name
	e, ok := m.catalog.Load().lookup(kindPrompt, name)
	allowed := func() bool { return ok && m.policyFor(ctx).Allows(e.item()) }
	notFound := fmt.Errorf("prompt '%s' not found: %w", name, server.ErrPromptNotFound)
	a, isRound := m.inRound(ctx, mcp.MethodPromptsGet, name, req.Params.MultiRoundTripParams, allowed,
		func(ctx context.Context) (any, error) { return m.getPrompt(ctx, e, req.Params.Arguments, begun) })
	switch {
	case !isRound && !allowed():
		// The policy changed since mcp-go's filter ran; its error hook
		// writes the audit line.
		return nil, notFound
	case !isRound:
		return m.getPrompt(ctx, e, req.Params.Arguments, begun)
	case a.inputRequired != nil:
		return relayPromptResult(a.inputRequired), nil
	case errors.Is(a.err, errUnknownState):
		return nil, invalidParams(unknownState(mcp.MethodPromptsGet))
	case errors.Is(a.err, errRetryRefused):
		// The round's work writes the one audit line.
		return nil, errors.Join(notFound, errRetryRefused)
	case a.err != nil:
		return nil, a.err
	}
	return a.value.(*mcp.GetPromptResult), nil
}

// getPrompt gets prompt e with args at its child and writes the audit line
// of the prompts/get begun then.
func (m *Mux) getPrompt(ctx context.Context, e *entry, args map[string]string, begun time.Time) (_ *mcp.GetPromptResult, err error) {
	d := DecisionAllowed
	defer func() { m.auditAccess(ctx, "prompt", e.name, e.child.alias, d, err, begun) }()
	params := map[string]any{"name": e.orig}
	if args != nil {
		params["arguments"] = args
	}
	raw, err := m.requestPinned(ctx, e.child, e, string(mcp.MethodPromptsGet), params)
	if errors.Is(err, errHeldSince) {
		d = DecisionHeld
		return nil, promptHeldSince(e.name)
	}
	if err != nil {
		return nil, err
	}
	// Relayed as it is, so it must be what a client can read.
	if _, err := mcp.ParseGetPromptResult(&raw); err != nil {
		return nil, fmt.Errorf("server %s answered prompts/get with %w: %v", e.child.alias, errMalformedResult, err)
	}
	if raw, err = naming.RewriteURIs(raw, naming.ResultPromptGet, m.linkRewriter(e.child)); err != nil {
		return nil, fmt.Errorf("server %s: prompts/get: %w", e.child.alias, err)
	}
	return relayPromptResult(raw), nil
}

// invalidParams is the error for a request the client can mend: INVALID_PARAMS
// with message.
func invalidParams(message string) error {
	return &relayedError{details: mcp.JSONRPCErrorDetails{Code: mcp.INVALID_PARAMS, Message: message}, wrapped: errors.New(message)}
}

// request sends one request of a client's to c and returns the raw result.
// It waits up to c's startup timeout for c to be ready, and gives up with
// the call timeout.
func (m *Mux) request(ctx context.Context, c *child, method string, params any) (json.RawMessage, error) {
	return m.requestPinned(ctx, c, nil, method, params)
}

// requestPinned is request for the tool or prompt e of c (if not nil),
// refused with errHeldSince where the session it gets does not list e as
// e was looked up (stillPinned).
func (m *Mux) requestPinned(ctx context.Context, c *child, e *entry, method string, params any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Mux.CallTimeout)
	defer cancel()
	st, err := c.ready(ctx)
	if err != nil {
		return nil, err
	}
	if e != nil && !m.stillPinned(st.listed, e) {
		return nil, errHeldSince
	}
	sess := st.sess
	raw, err := sess.rawRequest(ctx, method, params)
	if err != nil {
		// Ended by its own context (the client gave up, its round ended,
		// the call timeout): the child, told to cancel, is not gone.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("server %s: %s: %w", c.alias, method, context.Cause(ctx))
		}
		if sess.failed(ctx, err) {
			return nil, fmt.Errorf("server %s went away during %s: %s", c.alias, method, sess.lostWhy)
		}
		// The child's own error is the client's answer, as it would be
		// directly.
		var ce *rpcError
		if errors.As(err, &ce) {
			return nil, ce.relay()
		}
		return nil, fmt.Errorf("server %s: %s: %w", c.alias, method, err)
	}
	return raw, nil
}

// linkRewriter returns the rewrite of URIs that c put into a result: each
// becomes the form under which the mux exposes c's resources.
func (m *Mux) linkRewriter(c *child) func(string) (string, bool) {
	if !c.cfg.Prefix {
		return func(string) (string, bool) { return "", false }
	}
	return func(uri string) (string, bool) { return naming.ExposeURI(c.alias, uri), true }
}

// unmatchedURI is the resource mcp-go is asked for in place of a URI its
// catch-all template does not match; unmatchedArg is the argument that
// carries the URI the client asked for.
const (
	unmatchedURI = "mcpmux:unmatched"
	unmatchedArg = "mcpmux.uri"
)

// catchAll is the expression mcp-go matches the catch-all template {+uri}
// by, compiled apart so that matching takes no lock.
var catchAll = func() *naming.URITemplate {
	t, err := naming.CompileTemplate("{+uri}")
	if err != nil {
		panic(err)
	}
	return t
}()

// carryUnmatched makes a resources/read that mcp-go's catch-all template
// would not match (and one that names unmatchedURI itself) a read of
// unmatchedURI carrying the URI asked for, which mcp-go hands to its
// direct handler as it is. It runs before mcp-go routes the read.
func carryUnmatched(req *mcp.ReadResourceRequest) {
	if uri := req.Params.URI; uri == unmatchedURI || !catchAll.Match(uri) {
		req.Params.URI = unmatchedURI
		req.Params.Arguments = map[string]any{unmatchedArg: uri}
	}
}

// readResource routes a resources/read to the child that owns the URI and
// relays its answer. A URI the caller may not read is refused exactly like
// one no child has, and never reaches a child.
func (m *Mux) readResource(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	begun := time.Now()
	ctx = withClientMeta(ctx, req.Params.Meta)
	uri := req.Params.URI
	c, orig, ok := m.routeURI(m.catalog.Load(), uri)
	allowed := func() bool {
		return ok && m.policyFor(ctx).Allows(policy.Item{Kind: policy.Resource, Server: c.alias})
	}
	a, isRound := m.inRound(ctx, mcp.MethodResourcesRead, uri, req.Params.MultiRoundTripParams, allowed,
		func(ctx context.Context) (any, error) { return m.readAt(ctx, c, uri, orig, begun) })
	switch {
	case !isRound && !allowed():
		d := DecisionDenied
		if !ok {
			d = DecisionUnknown
		}
		m.auditAccess(ctx, "resource", uri, "", d, nil, begun)
		return nil, resourceNotFound(ctx, uri)
	case !isRound:
		return m.readAt(ctx, c, uri, orig, begun)
	case a.inputRequired != nil:
		return relayResourceContents(a.inputRequired), nil
	case errors.Is(a.err, errUnknownState):
		return nil, invalidParams(unknownState(mcp.MethodResourcesRead))
	case errors.Is(a.err, errRetryRefused):
		// The round's work writes the one audit line.
		return nil, resourceNotFound(ctx, uri)
	case a.err != nil:
		return nil, a.err
	}
	return a.value.([]mcp.ResourceContents), nil
}

// readAt reads orig, exposed as uri, at c and writes the audit line of the
// resources/read begun then.
func (m *Mux) readAt(ctx context.Context, c *child, uri, orig string, begun time.Time) (_ []mcp.ResourceContents, err error) {
	defer func() { m.auditAccess(ctx, "resource", uri, c.alias, DecisionAllowed, err, begun) }()
	raw, err := m.request(ctx, c, string(mcp.MethodResourcesRead), map[string]any{"uri": orig})
	if err != nil {
		return nil, err
	}
	if _, err := mcp.ParseReadResourceResult(&raw); err != nil {
		return nil, fmt.Errorf("server %s answered resources/read with %w: %v", c.alias, errMalformedResult, err)
	}
	raw, err = naming.RewriteURIs(raw, naming.ResultResourceRead, func(u string) (string, bool) {
		if u == orig {
			return uri, uri != orig
		}
		return m.linkRewriter(c)(u)
	})
	if err != nil {
		return nil, fmt.Errorf("server %s: resources/read: %w", c.alias, err)
	}
	return relayResourceContents(raw), nil
}

// routeURI finds the child a resource URI, as a client gives it, belongs to
// and the child's own URI for it: a listed resource; a URI in mcpmux's
// scheme under the alias of a child that offers resources; a URI that one of the unprefixed children's templates matches
// (first in config order); or, when exactly one unprefixed child offers
// resources, any other URI.
func (m *Mux) routeURI(cat *catalog, uri string) (*child, string, bool) {
	if e, ok := cat.lookup(kindResource, uri); ok {
		return e.child, e.orig, true
	}
	if alias, orig, ok := naming.SplitURI(uri); ok {
		// Only a child that offers resources owns the URIs under its
		// alias; one that offers none must not be asked (it would answer
		// in its own words what is, to the caller, an unknown URI).
		if c := m.child(alias); c != nil && offersResources(c) {
			return c, orig, true
		}
	}
	var only *child
	n := 0
	for _, e := range cat.kinds[kindTemplate].list {
		if e.child.cfg.Prefix {
			continue
		}
		if e.match(uri) {
			return e.child, uri, true
		}
	}
	for _, c := range m.children {
		if !c.cfg.Prefix && offersResources(c) {
			only, n = c, n+1
		}
	}
	if n == 1 {
		return only, uri, true
	}
	return nil, "", false
}

// offersResources reports whether c's current catalog declares resources.
func offersResources(c *child) bool {
	l := c.state.Load().listed
	return l != nil && l.caps.Resources != nil
}

// child returns the child of alias, or nil.
func (m *Mux) child(alias string) *child {
	for _, c := range m.children {
		if c.alias == alias {
			return c
		}
	}
	return nil
}

// completer routes completion/complete to the child that owns the prompt or
// resource template, under the child's own name for it.
type completer struct{ m *Mux }

// CompletePromptArgument answers a prompt the caller may not get (unknown,
// hidden, outside its policy, held by pinning) exactly as prompts/get
// does: -32602 "prompt 'NAME' not found: prompt not found".
func (cp completer) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	e, ok := cp.m.catalog.Load().lookup(kindPrompt, name)
	if ok && cp.m.policyFor(ctx).Allows(e.item()) {
		c, err := cp.complete(ctx, e.child, e, map[string]any{"type": "ref/prompt", "name": e.orig}, arg, cctx)
		if !errors.Is(err, errHeldSince) {
			return c, err
		}
	}
	return nil, promptNotFound(name)
}

// promptNotFound is the refusal of a prompt the caller may not use, with
// the code and text of mcp-go's prompts/get refusal, for the requests
// whose errors mcp-go answers with -32603 (completion/complete).
func promptNotFound(name string) error {
	err := fmt.Errorf("prompt '%s' not found: %w", name, server.ErrPromptNotFound)
	return &relayedError{details: mcp.JSONRPCErrorDetails{Code: mcp.INVALID_PARAMS, Message: err.Error()}, wrapped: err}
}

func (cp completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	m := cp.m
	cat := m.catalog.Load()
	var c *child
	orig := uri
	if e, ok := cat.lookup(kindTemplate, uri); ok {
		c, orig = e.child, e.orig
	} else if rc, o, ok := m.routeURI(cat, uri); ok {
		c, orig = rc, o
	}
	if c == nil || !m.policyFor(ctx).Allows(policy.Item{Kind: policy.Resource, Server: c.alias}) {
		return nil, resourceNotFound(ctx, uri)
	}
	return cp.complete(ctx, c, nil, map[string]any{"type": "ref/resource", "uri": orig}, arg, cctx)
}

// complete asks c to complete ref, refused with errHeldSince where e (a
// prompt, if not nil) is held since it was looked up (requestPinned).
func (cp completer) complete(ctx context.Context, c *child, e *entry, ref map[string]any, arg mcp.CompleteArgument, cctx mcp.CompleteContext) (*mcp.Completion, error) {
	params := map[string]any{"ref": ref, "argument": arg}
	if len(cctx.Arguments) > 0 {
		params["context"] = cctx
	}
	raw, err := cp.m.requestPinned(ctx, c, e, string(mcp.MethodCompletionComplete), params)
	if err != nil {
		return nil, err
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("server %s: completion/complete: a malformed result", c.alias)
	}
	return relayCompletion(raw), nil
}

// promptRefused writes the audit line of a prompts/get refused as unknown,
// hidden or denied.
func (m *Mux) promptRefused(ctx context.Context, name string, begun time.Time) {
	cat := m.catalog.Load()
	d := DecisionDenied
	if _, ok := cat.lookup(kindPrompt, name); !ok {
		d = DecisionUnknown
		if _, hidden := cat.hidden[name]; hidden {
			d = DecisionHidden
		} else if _, held := m.heldBy(kindPrompt, name); held {
			d = DecisionHeld
		}
	}
	m.auditAccess(ctx, "prompt", name, "", d, nil, begun)
}

// auditAccess writes the audit line of a prompts/get or a resources/read:
// what was asked for (the exposed name or URI), of which server, whether it
// was let through and how it ended. A refusal names no server, as for a
// call, so that the log alone does not tell what exists.
func (m *Mux) auditAccess(ctx context.Context, what, name, alias string, d Decision, err error, begun time.Time) {
	outcome := OutcomeOK
	switch {
	case d != DecisionAllowed:
		outcome = OutcomeRefused
	case err != nil:
		outcome = OutcomeToolError
	}
	m.audit.Info().
		Str("identity", IdentityFrom(ctx)).
		Str(what, name).
		Str("server", alias).
		Str("decision", string(d)).
		Str("outcome", string(outcome)).
		Int64("duration_ms", time.Since(begun).Milliseconds()).
		Msg(what)
}

// auditRefusal writes the audit line for calls mcp-go refused before they
// reached the handler: names outside the registry or the caller's policy.
func (m *Mux) auditRefusal(ctx context.Context, _ any, method mcp.MCPMethod, message any, err error) {
	if method == mcp.MethodSubscriptionsListen {
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			m.sessions.unregistered(cs)
			m.dropSubscriptions(cs)
		}
		return
	}
	if method == mcp.MethodPromptsGet && errors.Is(err, server.ErrPromptNotFound) && !errors.Is(err, errRetryRefused) {
		req, ok := message.(*mcp.GetPromptRequest)
		// A refused retry ends its round, whose work writes the one line.
		if ok && !m.refuseRetry(ctx, method, req.Params.Name, req.Params.RequestState) {
			m.promptRefused(ctx, req.Params.Name, time.Now())
		}
		return
	}
	if method != mcp.MethodToolsCall || !errors.Is(err, server.ErrToolNotFound) {
		return
	}
	req, ok := message.(*mcp.CallToolRequest)
	if !ok || m.refuseRetry(ctx, method, req.Params.Name, req.Params.RequestState) {
		// A refused retry ends its round, whose call writes the one line.
		return
	}
	// Re-running the look-up classifies the refusal for the log.
	m.classifyRefusal(ctx, req.Params.Name)
}

func (m *Mux) classifyRefusal(ctx context.Context, name string) {
	cat := m.catalog.Load()
	identity := IdentityFrom(ctx)
	if t, ok := cat.lookup(kindTool, name); ok {
		rec := CallRecord{Identity: identity, Tool: t.name, Server: t.child.alias, Decision: DecisionDenied, Outcome: OutcomeRefused}
		if v := m.viewerOf(ctx); v.p.Allows(t.item()) {
			if ref := v.refusal(t, seeing, nil); ref != nil {
				rec.Decision, rec.Rule = DecisionRule, ref.Rule
			}
		}
		m.done(rec, time.Now())
		return
	}
	m.refused(identity, name, cat, time.Now())
}

// Paging. The mux keeps catalog order; with page_size set it cuts the pages
// itself.

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

// beforeList waits for the children's first start and makes mcp-go refuse
// a cursor the mux did not hand out.
func (m *Mux) beforeList(ctx context.Context, cursor *mcp.Cursor) {
	_ = m.WaitReady(ctx)
	if c := *cursor; c != "" {
		if _, ok := decodeCursor(string(c)); !ok || m.cfg.Mux.PageSize == 0 {
			*cursor = invalidCursor
		}
	}
}

// listPayload is the answer to a list request of kind k: what the caller
// may see, from the snapshot's pre-encoded lists; with page_size set, one
// page from cursor.
func (m *Mux) listPayload(ctx context.Context, k kind, cursor mcp.Cursor) json.RawMessage {
	cat, v := m.catalog.Load(), m.viewerOf(ctx)
	member, _ := json.Marshal(kindWire[k].member)
	var b bytes.Buffer
	b.WriteByte('{')
	b.Write(member)
	b.WriteByte(':')
	size := m.cfg.Mux.PageSize
	if size == 0 {
		b.Write(cat.list(k, v))
		b.WriteByte('}')
		return b.Bytes()
	}
	all := cat.listed(k, v).entries
	start, _ := decodeCursor(string(cursor))
	start = min(start, len(all))
	end := min(start+size, len(all))
	b.Write(encodeEntries(all[start:end]))
	if end < len(all) {
		fmt.Fprintf(&b, `,"nextCursor":%q`, encodeCursor(end))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// listChanged is the notification that tells a client a kind's list changed.
var listChanged = [numKinds]mcp.MCPMethod{
	kindTool:     mcp.MethodNotificationToolsListChanged,
	kindPrompt:   mcp.MethodNotificationPromptsListChanged,
	kindResource: mcp.MethodNotificationResourcesListChanged,
	kindTemplate: mcp.MethodNotificationResourcesListChanged,
}

// PolicyChanged tells the sessions of every identity whose view changed
// between old and new that the lists they see changed.
func (m *Mux) PolicyChanged(old, new *policy.Set) {
	cat := m.catalog.Load()
	ids := map[string]bool{}
	for _, id := range policy.Changed(old, new) {
		ids[id] = true
	}
	m.notify(cat, cat, old, new, ids, []kind{kindTool, kindPrompt, kindResource, kindTemplate})
}

// notifyChanged tells every session whose view of the kinds changed
// between the snapshots prev and next that its lists changed.
//
// Sessions are known by identity, not by claims. For an identity whose
// rules read claims, a session is told when the policy's widest view
// (viewer.anyCaller) changed, which every caller's view is a part of, and
// on every edit of its policy: some callers may be told of a change that
// leaves their own list as it was, none misses one.
func (m *Mux) notifyChanged(prev, next *catalog, oldSet, newSet *policy.Set, kinds []kind) {
	m.notify(prev, next, oldSet, newSet, nil, kinds)
}

// notify sends each session of the identities in ids (every session, for
// nil ids) one list_changed per list whose content it sees changed.
func (m *Mux) notify(prev, next *catalog, oldSet, newSet *policy.Set, ids map[string]bool, kinds []kind) {
	type view struct{ changed [numKinds]bool }
	views := map[string]*view{}
	for cs, identity := range m.sessions.all() {
		if ids != nil && !ids[identity] {
			continue
		}
		v, ok := views[identity]
		if !ok {
			v = &view{}
			op, np := oldSet.For(identity), newSet.For(identity)
			byClaims := readsClaims(op) || readsClaims(np)
			for _, k := range kinds {
				if k == kindTool && byClaims && ids != nil {
					v.changed[k] = true // an edit of the policy
					continue
				}
				v.changed[k] = !bytes.Equal(prev.encode(k, viewer{p: op, anyCaller: byClaims}),
					next.list(k, viewer{p: np, anyCaller: byClaims}))
			}
			views[identity] = v
		}
		sent := map[mcp.MCPMethod]bool{}
		for _, k := range kinds {
			if !v.changed[k] || sent[listChanged[k]] {
				continue
			}
			sent[listChanged[k]] = true
			if f, ok := cs.(server.SessionWithSubscriptionFilter); ok {
				if filter, active := f.SubscriptionFilter(); active && !wants(filter, k) {
					continue // a listener that did not ask for these
				}
			}
			ctx := m.srv.WithContext(context.Background(), cs)
			if err := m.notifyClient(ctx, string(listChanged[k]), ownParams); err != nil {
				m.log.Warn().Err(err).Str("session", cs.SessionID()).Msg("could not send " + string(listChanged[k]))
			}
		}
	}
}

// wants reports whether a 2026-07-28 listener's filter asks for changes of
// kind k.
func wants(f mcp.SubscriptionFilter, k kind) bool {
	switch k {
	case kindTool:
		return f.ToolsListChanged
	case kindPrompt:
		return f.PromptsListChanged
	}
	return f.ResourcesListChanged
}
