package pipeline

// The request pipeline: every request of a client's that mcpmux answers
// itself (tools/call, prompts/get, resources/read, completion/complete,
// resources/subscribe and unsubscribe, and the four lists), of either
// protocol era and from either edge, goes through serve, in the same
// steps: the children's first start; a 2026-07-28 round it resumes or
// starts; the look-up in the catalog snapshot, the policy, its rules and
// the pins; the arguments; the child; the answer, as the child sent it
// but for its URIs; the audit line.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mcpmux/mcpmux/mux/child"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Serve answers r with the whole JSON-RPC answer, and its error if it is
// one. ctx carries its caller (upstream.WithIdentity) and ends when the
// request does (the client cancels it, its session ends).
func (m *Pipeline) Serve(ctx context.Context, r *upstream.Request) ([]byte, *frame.Error) {
	begun := time.Now()
	var span trace.Span
	if m.tracing != nil {
		ctx, span = m.tracing.Server(ctx, traceRequest(ctx, r))
	}
	a := m.serve(ctx, r)
	op := Operation{Method: r.Method, Took: time.Since(begun)}
	code, message := 0, ""
	if a.Err != nil {
		code, message = a.Err.Code, a.Err.Message
	}
	op.ErrorType = telemetry.OperationErrorType(code, a.isError())
	telemetry.EndServer(span, code, message, a.isError())
	m.observe.Operation(op)
	return m.decoration.encode(r, a), a.Err
}

// serve is Serve, before the answer is encoded.
func (m *Pipeline) serve(ctx context.Context, r *upstream.Request) (a answer) {
	defer func() {
		if p := recover(); p != nil {
			m.log.Error().Ctx(ctx).Str("method", r.Method).Interface("panic", p).Msg("a request's handling panicked; it is answered with an error")
			a = answer{Err: frame.Errorf(mcp.INTERNAL_ERROR, "panic recovered in %s: %v", r.Method, p)}
		}
	}()
	_ = m.WaitReady(ctx)
	switch mcp.MCPMethod(r.Method) {
	case mcp.MethodToolsCall:
		if m.own.Own(r.Params.Name) && Searching(m.settings.Load(), m.catalog.Load(), m.ViewerOf(ctx)) {
			return m.serveOwn(ctx, r)
		}
		return m.serveCall(ctx, r)
	case mcp.MethodPromptsGet:
		return m.servePrompt(ctx, r)
	case mcp.MethodResourcesRead:
		return m.serveRead(ctx, r)
	case mcp.MethodCompletionComplete:
		return m.serveCompletion(ctx, r)
	case mcp.MethodResourcesSubscribe, mcp.MethodResourcesUnsubscribe:
		return m.serveSubscription(ctx, r)
	}
	return m.serveList(ctx, r)
}

// serveCall answers a tools/call.
func (m *Pipeline) serveCall(ctx context.Context, r *upstream.Request) answer {
	name := r.Params.Name
	visible := func() (*catalog.Tool, bool) {
		t, ok := m.catalog.Load().Lookup(catalog.KindTool, name)
		return t, ok && m.ViewerOf(ctx).Sees(t)
	}
	allowed := func() bool { _, ok := visible(); return ok }
	t, ok := visible()
	if !ok && (r.Params.RequestState == "" || !r.Modern()) {
		m.audit.ClassifyRefusal(ctx, name)
		return answer{Err: toolNotFound(name)}
	}
	if ok && t.Task == mcp.TaskSupportRequired {
		// A 2026-07-28 client has no tasks, and a 2025-11-25 one that asks
		// for one goes to mcp-go's task store.
		rec := CallRecord{Identity: upstream.IdentityFrom(ctx), Tool: t.Name, Server: t.Server, Decision: DecisionInvalid, Outcome: OutcomeRefused}
		m.audit.done(ctx, rec, time.Now())
		return answer{Err: frame.Errorf(mcp.METHOD_NOT_FOUND, "tool '%s' requires task augmentation", name)}
	}
	up := &child.Call{Identity: upstream.IdentityFrom(ctx), To: r.Attachment(ctx), Meta: r.Meta}
	args := json.RawMessage(r.Params.Arguments)
	rd, isRound := m.rounds.serve(ctx, r, mcp.MethodToolsCall, name, allowed, func(ctx context.Context, up *child.Call) answer {
		return toolAnswer(m.Call(ctx, up, name, args), name)
	})
	switch {
	case !isRound && !ok:
		// A retry whose requestState names no round of the caller's, for a
		// name it may not call: refused like any call of it.
		m.audit.ClassifyRefusal(ctx, name)
		return answer{Err: toolNotFound(name)}
	case !isRound:
		return toolAnswer(m.Call(ctx, up, name, args), name)
	case rd.inputRequired != nil:
		return answer{Result: rd.inputRequired}
	case errors.Is(rd.err, errUnknownState):
		return ownResult(mcp.NewToolResultError(UnknownState(mcp.MethodToolsCall)))
	case errors.Is(rd.err, errRetryRefused):
		return answer{Err: toolNotFound(name)}
	}
	return rd.value
}

// toolNotFound is the refusal of a tool the caller may not call (unknown,
// hidden, outside its policy, hidden by a rule, held by pinning), with the
// code and text mcp-go gives an unknown tool, so that every refusal reads
// alike.
func toolNotFound(name string) *frame.Error {
	return &frame.Error{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("tool '%s' not found: %v", name, server.ErrToolNotFound),
		Cause: ErrUnknownTool}
}

// toolAnswer is the answer to a call that ended as res did.
func toolAnswer(res Result, name string) answer {
	switch {
	case res.Raw != nil:
		return answer{Result: res.Raw, ToolError: res.Outcome == OutcomeToolError}
	case res.Tool == nil:
		// Refused as an unknown name: the catalog or the policy changed
		// since the tool was looked up.
		return ownResult(mcp.NewToolResultError(ErrUnknownTool.Error() + ": " + name))
	}
	return ownResult(res.Tool)
}

// servePrompt answers a prompts/get.
func (m *Pipeline) servePrompt(ctx context.Context, r *upstream.Request) answer {
	begun := time.Now()
	name := r.Params.Name
	args, err := promptArguments(r.Params.Arguments)
	if err != nil {
		return answer{Err: err}
	}
	e, ok := m.catalog.Load().Lookup(catalog.KindPrompt, name)
	allowed := func() bool { return ok && m.PolicyFor(ctx).Allows(e.Item()) }
	if !allowed() && (r.Params.RequestState == "" || !r.Modern()) {
		m.audit.promptRefused(ctx, name, begun)
		return answer{Err: promptNotFound(name)}
	}
	up := &child.Call{Identity: upstream.IdentityFrom(ctx), To: r.Attachment(ctx), Meta: r.Meta}
	rd, isRound := m.rounds.serve(ctx, r, mcp.MethodPromptsGet, name, allowed, func(ctx context.Context, up *child.Call) answer {
		return m.getPrompt(ctx, up, e, args, begun)
	})
	switch {
	case !isRound && !allowed():
		m.audit.promptRefused(ctx, name, begun)
		return answer{Err: promptNotFound(name)}
	case !isRound:
		return m.getPrompt(ctx, up, e, args, begun)
	case rd.inputRequired != nil:
		return answer{Result: rd.inputRequired}
	case errors.Is(rd.err, errUnknownState):
		return answer{Err: frame.Errorf(mcp.INVALID_PARAMS, "%s", UnknownState(mcp.MethodPromptsGet))}
	case errors.Is(rd.err, errRetryRefused):
		// The round's work writes the one audit line.
		return answer{Err: promptNotFound(name)}
	}
	return rd.value
}

// promptArguments reads a prompts/get's arguments, which are strings.
func promptArguments(raw []byte) (map[string]string, *frame.Error) {
	if raw == nil {
		return nil, nil
	}
	var args map[string]string
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, frame.Errorf(mcp.INVALID_PARAMS, "invalid params of prompts/get: arguments must be an object of strings")
	}
	return args, nil
}

// promptNotFound is the refusal of a prompt the caller may not get
// (unknown, hidden, outside its policy, held by pinning), in prompts/get
// and completion/complete alike, with the code and text mcp-go gives an
// unknown prompt.
func promptNotFound(name string) *frame.Error {
	return &frame.Error{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("prompt '%s' not found: %v", name, server.ErrPromptNotFound),
		Cause: server.ErrPromptNotFound}
}

// getPrompt gets prompt e with args at its child and writes the audit line
// of the prompts/get begun then.
func (m *Pipeline) getPrompt(ctx context.Context, up *child.Call, e *catalog.Entry, args map[string]string, begun time.Time) (a answer) {
	d := DecisionAllowed
	var err error
	defer func() { m.audit.auditAccess(ctx, "prompt", e.Name, e.Server, d, err, begun) }()
	params := map[string]any{"name": e.Orig}
	if args != nil {
		params["arguments"] = args
	}
	raw, err := m.requestPinned(ctx, up, m.child(e.Server), e, string(mcp.MethodPromptsGet), params)
	if errors.Is(err, errHeldSince) {
		d = DecisionHeld
		return answer{Err: promptNotFound(e.Name)}
	}
	if err != nil {
		return errorAnswer(err)
	}
	// Relayed as it is, so it must be what a client can read.
	if _, err = mcp.ParseGetPromptResult(&raw); err != nil {
		err = fmt.Errorf("server %s answered prompts/get with %w: %v", e.Server, child.ErrMalformedResult, err)
		return errorAnswer(err)
	}
	if raw, err = naming.RewriteURIs(raw, naming.ResultPromptGet, linkRewriter(m.child(e.Server))); err != nil {
		err = fmt.Errorf("server %s: prompts/get: %w", e.Server, err)
		return errorAnswer(err)
	}
	return answer{Result: raw}
}

// serveRead answers a resources/read: routed to the child that owns the
// URI. A URI the caller may not read is refused exactly like one no child
// has, and never reaches a child.
func (m *Pipeline) serveRead(ctx context.Context, r *upstream.Request) answer {
	begun := time.Now()
	uri := r.Params.URI
	c, orig, ok := m.RouteURI(m.catalog.Load(), uri)
	allowed := func() bool {
		return ok && m.PolicyFor(ctx).Allows(policy.Item{Kind: policy.Resource, Server: c.Alias()})
	}
	refuse := func() answer {
		d := DecisionDenied
		if !ok {
			d = DecisionUnknown
		}
		m.audit.auditAccess(ctx, "resource", uri, "", d, nil, begun)
		return answer{Err: resourceNotFound(r.Modern(), uri)}
	}
	if !allowed() && (r.Params.RequestState == "" || !r.Modern()) {
		return refuse()
	}
	up := &child.Call{Identity: upstream.IdentityFrom(ctx), To: r.Attachment(ctx), Meta: r.Meta}
	rd, isRound := m.rounds.serve(ctx, r, mcp.MethodResourcesRead, uri, allowed, func(ctx context.Context, up *child.Call) answer {
		return m.readAt(ctx, up, c, uri, orig, begun)
	})
	switch {
	case !isRound && !allowed():
		return refuse()
	case !isRound:
		return m.readAt(ctx, up, c, uri, orig, begun)
	case rd.inputRequired != nil:
		return answer{Result: rd.inputRequired}
	case errors.Is(rd.err, errUnknownState):
		return answer{Err: frame.Errorf(mcp.INVALID_PARAMS, "%s", UnknownState(mcp.MethodResourcesRead))}
	case errors.Is(rd.err, errRetryRefused):
		// The round's work writes the one audit line.
		return answer{Err: resourceNotFound(r.Modern(), uri)}
	}
	return rd.value
}

// resourceNotFound is the refusal of a URI no child owns or the caller may
// not read, the same for both, with the code of the caller's protocol era.
func resourceNotFound(modern bool, uri string) *frame.Error {
	code := mcp.RESOURCE_NOT_FOUND
	if modern {
		code = mcp.INVALID_PARAMS
	}
	data, _ := json.Marshal(map[string]any{"uri": uri})
	return &frame.Error{Code: code, Message: "Resource not found", Data: data, Cause: server.ErrResourceNotFound}
}

// readAt reads orig, exposed as uri, at c and writes the audit line of the
// resources/read begun then.
func (m *Pipeline) readAt(ctx context.Context, up *child.Call, c *child.Server, uri, orig string, begun time.Time) answer {
	var err error
	defer func() { m.audit.auditAccess(ctx, "resource", uri, c.Alias(), DecisionAllowed, err, begun) }()
	raw, err := m.requestPinned(ctx, up, c, nil, string(mcp.MethodResourcesRead), map[string]any{"uri": orig})
	if err != nil {
		return errorAnswer(err)
	}
	if _, err = mcp.ParseReadResourceResult(&raw); err != nil {
		err = fmt.Errorf("server %s answered resources/read with %w: %v", c.Alias(), child.ErrMalformedResult, err)
		return errorAnswer(err)
	}
	raw, err = naming.RewriteURIs(raw, naming.ResultResourceRead, func(u string) (string, bool) {
		if u == orig {
			return uri, uri != orig
		}
		return linkRewriter(c)(u)
	})
	if err != nil {
		err = fmt.Errorf("server %s: resources/read: %w", c.Alias(), err)
		return errorAnswer(err)
	}
	return answer{Result: raw}
}

// completionRef is a completion/complete's ref.
type completionRef struct {
	Type string `json:"type"`
	Name string `json:"name"`
	URI  string `json:"uri"`
}

// serveCompletion answers a completion/complete: routed to the child that
// owns the prompt or the resource template, under the child's own name for
// it. A prompt the caller may not get is refused exactly as prompts/get
// refuses it, a URI as resources/read does.
func (m *Pipeline) serveCompletion(ctx context.Context, r *upstream.Request) answer {
	var ref completionRef
	if r.Params.Ref == nil || json.Unmarshal(r.Params.Ref, &ref) != nil {
		return answer{Err: frame.Errorf(mcp.INVALID_PARAMS, "invalid params of completion/complete: ref must be a reference to a prompt or a resource")}
	}
	up := &child.Call{Identity: upstream.IdentityFrom(ctx), To: r.Attachment(ctx), Meta: r.Meta}
	cat := m.catalog.Load()
	switch ref.Type {
	case "ref/prompt":
		e, ok := cat.Lookup(catalog.KindPrompt, ref.Name)
		if !ok || !m.PolicyFor(ctx).Allows(e.Item()) {
			return answer{Err: promptNotFound(ref.Name)}
		}
		a := m.complete(ctx, up, r, m.child(e.Server), e, map[string]any{"type": "ref/prompt", "name": e.Orig})
		if a.Err != nil && errors.Is(a.Err, errHeldSince) {
			return answer{Err: promptNotFound(ref.Name)}
		}
		return a
	case "ref/resource":
		var c *child.Server
		orig := ref.URI
		if e, ok := cat.Lookup(catalog.KindTemplate, ref.URI); ok {
			c, orig = m.child(e.Server), e.Orig
		} else if rc, o, ok := m.RouteURI(cat, ref.URI); ok {
			c, orig = rc, o
		}
		if c == nil || !m.PolicyFor(ctx).Allows(policy.Item{Kind: policy.Resource, Server: c.Alias()}) {
			return answer{Err: resourceNotFound(r.Modern(), ref.URI)}
		}
		return m.complete(ctx, up, r, c, nil, map[string]any{"type": "ref/resource", "uri": orig})
	}
	return answer{Err: frame.Errorf(mcp.INVALID_PARAMS, "invalid params of completion/complete: unknown reference type %q", ref.Type)}
}

// complete asks c to complete ref for r, refused with errHeldSince where e
// (a prompt, if not nil) is held since it was looked up (requestPinned).
func (m *Pipeline) complete(ctx context.Context, up *child.Call, r *upstream.Request, c *child.Server, e *catalog.Entry, ref map[string]any) answer {
	params := map[string]any{"ref": ref}
	if r.Params.Argument != nil {
		params["argument"] = json.RawMessage(r.Params.Argument)
	}
	if r.Params.Context != nil && hasArguments(r.Params.Context) {
		params["context"] = json.RawMessage(r.Params.Context)
	}
	raw, err := m.requestPinned(ctx, up, c, e, string(mcp.MethodCompletionComplete), params)
	if errors.Is(err, errHeldSince) {
		return answer{Err: &frame.Error{Cause: errHeldSince}}
	}
	if err != nil {
		return errorAnswer(err)
	}
	var res struct {
		Completion *json.RawMessage `json:"completion"`
	}
	if json.Unmarshal(raw, &res) != nil || res.Completion == nil {
		return errorAnswer(fmt.Errorf("server %s: completion/complete: a malformed result", c.Alias()))
	}
	return answer{Result: raw}
}

// hasArguments reports whether a completion's context names arguments.
func hasArguments(context []byte) bool {
	var c struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	return json.Unmarshal(context, &c) == nil && len(c.Arguments) > 0
}

// serveSubscription answers resources/subscribe and resources/unsubscribe:
// taken to the owning child (subscribed there for the resource's first
// subscriber, unsubscribed with its last), and recorded for the session.
func (m *Pipeline) serveSubscription(ctx context.Context, r *upstream.Request) answer {
	uri := r.Params.URI
	c, orig, ok := m.RouteURI(m.catalog.Load(), uri)
	if !ok || r.Sess == nil || !m.PolicyFor(ctx).Allows(policy.Item{Kind: policy.Resource, Server: c.Alias()}) {
		return answer{Err: resourceNotFound(r.Modern(), uri)}
	}
	if r.Method == string(mcp.MethodResourcesUnsubscribe) {
		m.subs.Unsubscribe(ctx, c.Alias(), orig, r.Sess)
		return ownResult(&mcp.Result{})
	}
	if err := m.subs.Subscribe(ctx, c, orig, uri, r.Sess); err != nil {
		return errorAnswer(err)
	}
	return ownResult(&mcp.Result{})
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

// listKinds are the kinds the list methods list.
var listKinds = map[mcp.MCPMethod]catalog.Kind{
	mcp.MethodToolsList: catalog.KindTool, mcp.MethodPromptsList: catalog.KindPrompt,
	mcp.MethodResourcesList: catalog.KindResource, mcp.MethodResourcesTemplatesList: catalog.KindTemplate,
}

// serveList answers a list request: what the caller may see, from the
// snapshot's pre-encoded lists; with page_size set, one page from its
// cursor.
func (m *Pipeline) serveList(ctx context.Context, r *upstream.Request) answer {
	k := listKinds[mcp.MCPMethod(r.Method)]
	start := 0
	if r.Params.Cursor != "" {
		var ok bool
		if start, ok = decodeCursor(r.Params.Cursor); !ok || m.settings.Load().PageSize == 0 {
			return answer{Err: frame.Errorf(mcp.INVALID_PARAMS, "invalid params of %s: the cursor %q is not one mcpmux handed out", r.Method, r.Params.Cursor)}
		}
	}
	cat, v := m.catalog.Load(), m.ViewerOf(ctx)
	member := catalog.KindWire[k].Member
	size := m.settings.Load().PageSize
	if k == catalog.KindTool && Searching(m.settings.Load(), cat, v) {
		// Two tools and the always ones: never more than a page.
		return answer{Result: append(append([]byte(`{"tools":`), m.ToolList(cat, v)...), '}')}
	}
	if size == 0 {
		list := cat.List(k, v)
		out := make([]byte, 0, len(member)+len(list)+5)
		out = append(out, `{"`...)
		out = append(out, member...)
		out = append(out, `":`...)
		out = append(out, list...)
		return answer{Result: append(out, '}')}
	}
	all := cat.Listed(k, v).Entries
	start = min(start, len(all))
	end := min(start+size, len(all))
	out := []byte(`{"` + member + `":`)
	out = append(out, catalog.EncodeEntries(all[start:end])...)
	if end < len(all) {
		out = fmt.Appendf(out, `,"nextCursor":%q`, encodeCursor(end))
	}
	return answer{Result: append(out, '}')}
}
