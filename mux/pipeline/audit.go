package pipeline

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Auditor writes the one audit line of every request mcpmux answers, and
// tells metrics of every call.
type Auditor struct {
	log      zerolog.Logger
	observe  Observer
	catalog  *atomic.Pointer[catalog.Catalog]
	pinning  func() *publish.Pinning
	viewerOf func(ctx context.Context) catalog.Viewer
}

// Audit is what writes the audit lines.
func (m *Pipeline) Audit() *Auditor { return &m.audit }

// ruleRefused records a call a rule refused and answers it with answer
// (nil: as an unknown name).
func (a *Auditor) ruleRefused(ctx context.Context, rec CallRecord, ref *policy.Refusal, answer *mcp.CallToolResult, begun time.Time) Result {
	rec.Decision, rec.Outcome, rec.Rule = DecisionRule, OutcomeRefused, ref.Rule
	a.done(ctx, rec, begun)
	return Result{Decision: DecisionRule, Outcome: OutcomeRefused, Tool: answer, Rule: ref}
}

// refused records a call whose name is not in the catalog and says why:
// unknown, or hidden by the config.
func (a *Auditor) refused(ctx context.Context, identity, name string, cat *catalog.Catalog, begun time.Time) Decision {
	rec := CallRecord{Identity: identity, Decision: DecisionUnknown, Outcome: OutcomeRefused}
	if alias, hidden := cat.Hidden[name]; hidden {
		rec.Decision, rec.Server = DecisionHidden, alias
	} else if alias, held := a.pinning().HeldBy(catalog.KindTool, name); held {
		rec.Decision, rec.Server = DecisionHeld, alias
	}
	a.auditLine(ctx, rec, name, time.Since(begun))
	a.observe.CallDone(rec)
	return rec.Decision
}

// done records a call on a tool of the catalog.
func (a *Auditor) done(ctx context.Context, rec CallRecord, begun time.Time) {
	rec.Total = time.Since(begun)
	a.auditLine(ctx, rec, rec.Tool, rec.Total)
	a.observe.CallDone(rec)
}

// auditLine writes the one line every call leaves, naming the tool as the
// caller did, and the rule that refused it by its index and line. Argument
// values never appear in it.
func (a *Auditor) auditLine(ctx context.Context, rec CallRecord, name string, took time.Duration) {
	d := telemetry.Decision{Server: rec.Server, Decision: string(rec.Decision), Outcome: string(rec.Outcome)}
	if rec.Rule != nil {
		d.Rule, d.RuleLine, d.HasRule = rec.Rule.Index, rec.Rule.Line, true
	}
	telemetry.Decided(ctx, d)
	e := telemetry.Log(ctx, a.log.Info()).
		Str("identity", rec.Identity).
		Str("tool", name).
		Str("server", rec.Server).
		Str("decision", string(rec.Decision)).
		Str("outcome", string(rec.Outcome))
	if rec.Rule != nil {
		e = e.Int("rule", rec.Rule.Index).Int("rule_line", rec.Rule.Line)
	}
	e.Int64("duration_ms", took.Milliseconds()).Msg("call")
}

// promptRefused writes the audit line of a prompts/get refused as unknown,
// hidden or denied.
func (a *Auditor) promptRefused(ctx context.Context, name string, begun time.Time) {
	cat := a.catalog.Load()
	d := DecisionDenied
	if _, ok := cat.Lookup(catalog.KindPrompt, name); !ok {
		d = DecisionUnknown
		if _, hidden := cat.Hidden[name]; hidden {
			d = DecisionHidden
		} else if _, held := a.pinning().HeldBy(catalog.KindPrompt, name); held {
			d = DecisionHeld
		}
	}
	a.auditAccess(ctx, "prompt", name, "", d, nil, begun)
}

// auditAccess writes the audit line of a prompts/get or a resources/read:
// what was asked for (the exposed name or URI), of which server, whether it
// was let through and how it ended. A refusal names no server, as for a
// call, so that the log alone does not tell what exists.
func (a *Auditor) auditAccess(ctx context.Context, what, name, alias string, d Decision, err error, begun time.Time) {
	outcome := OutcomeOK
	switch {
	case d != DecisionAllowed:
		outcome = OutcomeRefused
	case err != nil:
		outcome = OutcomeToolError
	}
	telemetry.Decided(ctx, telemetry.Decision{Server: alias, Decision: string(d), Outcome: string(outcome)})
	telemetry.Log(ctx, a.log.Info()).
		Str("identity", upstream.IdentityFrom(ctx)).
		Str(what, name).
		Str("server", alias).
		Str("decision", string(d)).
		Str("outcome", string(outcome)).
		Int64("duration_ms", time.Since(begun).Milliseconds()).
		Msg(what)
}

func (a *Auditor) ClassifyRefusal(ctx context.Context, name string) {
	cat := a.catalog.Load()
	identity := upstream.IdentityFrom(ctx)
	if t, ok := cat.Lookup(catalog.KindTool, name); ok {
		rec := CallRecord{Identity: identity, Tool: t.Name, Server: t.Server, Decision: DecisionDenied, Outcome: OutcomeRefused}
		if v := a.viewerOf(ctx); v.Policy.Allows(t.Item()) {
			if ref := v.Refusal(t, catalog.Seeing, nil); ref != nil {
				rec.Decision, rec.Rule = DecisionRule, ref.Rule
			}
		}
		a.done(ctx, rec, time.Now())
		return
	}
	a.refused(ctx, identity, name, cat, time.Now())
}

// unknownStateRefused writes the audit line of a retry (method, for the
// exposed name) whose requestState names no round of the caller's: as for
// a request of a name that does not exist. Like such a request it does not
// count against the rate limit.
func (a *Auditor) unknownStateRefused(ctx context.Context, method mcp.MCPMethod, name string) {
	now := time.Now()
	switch method {
	case mcp.MethodToolsCall:
		// name is in the catalog (the policy allows it), so refused calls
		// it unknown, not hidden.
		a.refused(ctx, upstream.IdentityFrom(ctx), name, a.catalog.Load(), now)
	case mcp.MethodPromptsGet:
		a.auditAccess(ctx, "prompt", name, "", DecisionUnknown, nil, now)
	case mcp.MethodResourcesRead:
		a.auditAccess(ctx, "resource", name, "", DecisionUnknown, nil, now)
	}
}
