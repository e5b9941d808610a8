package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/mux/child/link"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/mux/ratelimit"
	"github.com/mcpmux/mcpmux/mux/telemetry"

	"github.com/mcpmux/mcpmux/mux/child"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Decision says whether a call was let through, and if not, why. The caller
// is told the same "unknown tool" for unknown, hidden and denied, and for a
// rule that ignores the arguments; only the log says which.
type Decision string

const (
	DecisionAllowed Decision = "allowed"
	DecisionUnknown Decision = "unknown"
	DecisionHidden  Decision = "hidden"
	DecisionDenied  Decision = "denied"
	DecisionInvalid Decision = "invalid"
	// DecisionRule is a call a rule of the caller's policy refused.
	DecisionRule Decision = "rule"
)

// Outcome says how an allowed call ended.
type Outcome string

const (
	OutcomeOK          Outcome = "ok"
	OutcomeToolError   Outcome = "tool_error"
	OutcomeUnavailable Outcome = "unavailable"
	OutcomeTimeout     Outcome = "timeout"
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeRetried     Outcome = "retried"
	// OutcomeCancelled is a call its caller gave up on before the callAnswer.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeBusy is a call refused because its server had max_in_flight
	// calls in flight and max_queued more waiting.
	OutcomeBusy Outcome = "busy"
	// OutcomeRateLimited is a call refused because its identity had used up
	// its rate limit.
	OutcomeRateLimited Outcome = "rate_limited"
	// OutcomeRefused is the outcome of every call that was not allowed.
	OutcomeRefused Outcome = "refused"
)

// ErrUnknownTool is the one refusal a caller sees for a name that is not in
// the registry, is hidden, or is outside its policy.
var ErrUnknownTool = errors.New("unknown tool")

// Result is how one call through the mux ended.
type Result struct {
	Decision Decision
	Outcome  Outcome
	// Raw is the child's result, to hand back as it is (resource URIs
	// rewritten); nil when mcpmux answered itself.
	Raw json.RawMessage
	// Tool is mcpmux's own callAnswer when Raw is nil; both are nil when
	// Decision is unknown, hidden or denied, or rule by a rule that ignores
	// the arguments (the caller answers with ErrUnknownTool instead).
	Tool *mcp.CallToolResult
	// Rule is the rule that refused the call, when Decision is rule.
	Rule *policy.Refusal
}

// ToolResult returns the answer as mcp-go's type: the child's result
// decoded, or mcpmux's own; nil when the call was refused as unknown.
func (r Result) ToolResult() *mcp.CallToolResult {
	if r.Raw == nil {
		return r.Tool
	}
	res, err := mcp.ParseCallToolResult(&r.Raw)
	if err != nil { // checked when it arrived; cannot happen
		return mcp.NewToolResultError(err.Error())
	}
	return res
}

// CallTool sends one call through the whole pipeline, in this order:
// registry look-up, policy and the policy's rules that ignore the arguments
// (refused as an unknown name), the identity's rate limit, arguments (one
// JSON object, no duplicate keys nor keys equal up to case, bounded depth
// and validation work), schema validation, the rules that read the
// arguments, a slot of the child's max_in_flight (waiting in its queue if
// need be), the child, restarts.
// identity names the caller and ctx carries its claims (ClaimsFrom), which
// the rules see: both must be one caller's, as WithCaller stores them, or
// one identity's call is judged by another's claims. arguments are given
// as JSON (json.RawMessage, forwarded byte for byte) or decoded (nil means
// none). It writes one audit line.
//
// The rate limit comes after the policy, so that a name the caller may not
// use is refused the same way however fast it calls, and before decoding
// and validation, so that a caller over its limit makes mcpmux do no work
// for it.
func (m *Pipeline) CallTool(ctx context.Context, identity, name string, arguments any) Result {
	return m.Call(ctx, &child.Call{Identity: identity}, name, arguments)
}

// Call is CallTool for up, whose identity is the caller's.
func (m *Pipeline) Call(ctx context.Context, up *child.Call, name string, arguments any) Result {
	identity := up.Identity
	begun := time.Now()
	cat := m.catalog.Load()
	t, ok := cat.Lookup(catalog.KindTool, name)
	if !ok {
		return Result{Decision: m.audit.refused(ctx, identity, name, cat, begun), Outcome: OutcomeRefused}
	}
	rec := CallRecord{Identity: identity, Tool: t.Name, Server: t.Server, Decision: DecisionAllowed}
	v := catalog.Viewer{Policy: m.policies.Current().For(identity)}
	if !v.Policy.Allows(t.Item()) {
		rec.Decision, rec.Outcome = DecisionDenied, OutcomeRefused
		m.audit.done(ctx, rec, begun)
		return Result{Decision: DecisionDenied, Outcome: OutcomeRefused}
	}
	rules := len(v.Policy.Rules()) > 0
	if rules {
		v.Claims = upstream.ClaimsFrom(ctx)
		if ref := v.Refusal(t, catalog.Seeing, nil); ref != nil {
			return m.audit.ruleRefused(ctx, rec, ref, nil, begun)
		}
	}
	if lim := m.settings.Load(); lim.RateLimit > 0 && !m.admit.limiters.Allow(identity, lim.RateLimit, lim.RateBurst) {
		rec.Outcome = OutcomeRateLimited
		m.audit.done(ctx, rec, begun)
		return Result{Decision: DecisionAllowed, Outcome: OutcomeRateLimited,
			Tool: mcp.NewToolResultError(ratelimit.Message(identity, lim.RateLimit, lim.RateBurst))}
	}
	argMap, raw, levels, err := args.Object(arguments)
	if err == nil {
		err = t.Args.Check(argMap, levels)
	}
	telemetry.ArgumentsChecked(ctx, err == nil)
	if err != nil {
		rec.Decision, rec.Outcome = DecisionInvalid, OutcomeRefused
		m.audit.done(ctx, rec, begun)
		return Result{Decision: DecisionInvalid, Outcome: OutcomeRefused,
			Tool: mcp.NewToolResultError(fmt.Sprintf("%s: %v", name, err))}
	}
	if rules {
		if ref := v.Refusal(t, catalog.Calling, argMap); ref != nil {
			return m.audit.ruleRefused(ctx, rec, ref, mcp.NewToolResultError(name+": "+ref.Error()), begun)
		}
	}
	res, outcome, childTime := m.calls.forward(ctx, up, t, raw)
	result := Result{Decision: DecisionAllowed, Outcome: outcome}
	if outcome == OutcomeRefused { // held since it was looked up (stillPinned)
		result.Decision, rec.Decision = DecisionHeld, DecisionHeld
	}
	if res.raw != nil {
		result.Raw = res.raw
	} else {
		result.Tool = res.own
	}
	rec.Child = childTime
	rec.Outcome = outcome
	m.audit.done(ctx, rec, begun)
	return result
}

// callAnswer is how a forwarded call is answered: the child's result as it is,
// or one of mcpmux's own.
type callAnswer struct {
	raw json.RawMessage
	own *mcp.CallToolResult
}

func own(r *mcp.CallToolResult) callAnswer { return callAnswer{own: r} }

// stage is how far a call got before its context ended.
type stage int

const (
	stageQueued   stage = iota // waiting for a slot of the child's max_in_flight
	stageStarting              // waiting for the child to be ready
	stageSent                  // sent to the child
)

// forward calls the child once it has a slot of the child's max_in_flight
// and the child is ready, and re-runs a read-only call once, in the same
// slot, if the child died under it. child is the time from the slot on.
// It returns OutcomeRefused, and no answer, for a tool held by pinning
// since it was looked up (stillPinned): the session it got lists another
// definition.
func (f *Forwarder) forward(ctx context.Context, up *child.Call, t *catalog.Tool, args json.RawMessage) (res callAnswer, outcome Outcome, childTime time.Duration) {
	f.inflight.Add(1)
	defer func() {
		if f.inflight.Add(-1) == 0 {
			select {
			case f.idle <- struct{}{}:
			default:
			}
		}
	}()
	ctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	defer f.cuts.add(f.cut, cut)()
	ctx, cancel := context.WithTimeout(ctx, taskTimeout(f.settings.Load().CallTimeout, up))
	defer cancel()
	g := f.admit.gate(f.child(t.Server))
	queued := time.Now()
	if err := g.acquire(ctx); err != nil {
		if errors.Is(err, errBusy) {
			return own(mcp.NewToolResultError(g.busyMessage(t.Server))), OutcomeBusy, 0
		}
		res, outcome := f.ctxEnded(ctx, up, t, stageQueued)
		return own(res), outcome, 0
	}
	defer g.release()
	telemetry.AdmissionWaited(ctx, time.Since(queued))
	f.observe.CallStarted(t.Server)
	defer f.observe.CallFinished(t.Server)
	sent := time.Now()
	res, outcome = f.send(ctx, up, t, args)
	return res, outcome, time.Since(sent)
}

// Forwarder takes a call that passed the pipeline's checks to its child: a
// slot of the child's max_in_flight (waiting in its queue if need be), the
// child once it is ready, the retry of a call the child died under, the
// child's result relayed. It owns the calls in flight.
type Forwarder struct {
	settings *atomic.Pointer[Settings]
	admit    *admission
	child    func(alias string) *child.Server
	// inForce is the child in force for an alias, nil for one taken out
	// of the server list: where a call cut with its child is re-run.
	inForce func(alias string) *child.Server
	pinning func() *publish.Pinning
	observe Observer
	tracing *telemetry.Tracing

	inflight atomic.Int64  // calls being forwarded
	idle     chan struct{} // gets a token when inflight drops to zero
	// cut ends every call in flight when mcpmux stops (Cut). Calls watch
	// it themselves: cancelling the transports' request contexts instead
	// would stop mcp-go from sending the answers.
	cut      context.Context
	cutCalls context.CancelCauseFunc
	cuts     callCuts // the calls in flight, reached by cut
}

// Queued is how many calls wait for one of alias's slots (max_in_flight).
func (f *Forwarder) Queued(alias string) int64 {
	c := f.child(alias)
	if c == nil {
		return 0
	}
	return f.admit.gate(c).queued.Load()
}

// Regate has c's calls from now on take their turns under c's config as it
// is now (max_in_flight, max_queued); those holding or awaiting a turn
// keep the old one.
func (f *Forwarder) Regate(c *child.Server) { f.admit.gates.Delete(c) }

// callCuts reaches every call in flight when mcpmux stops. Registering with
// the stop context itself (context.AfterFunc) would take its lock, one for
// all calls, twice a call; a call here is one entry of a concurrent map
// instead, and the stop context has one AfterFunc for them all.
type callCuts struct {
	once  sync.Once
	calls sync.Map // *callCut -> struct{}
}

type callCut struct{ cut context.CancelCauseFunc }

// add makes stop's end cut the call, with stop's cause, until the returned
// function is called.
func (c *callCuts) add(stop context.Context, cut context.CancelCauseFunc) (remove func()) {
	c.once.Do(func() {
		context.AfterFunc(stop, func() {
			c.calls.Range(func(k, _ any) bool {
				k.(*callCut).cut(context.Cause(stop))
				return true
			})
		})
	})
	e := &callCut{cut: cut}
	c.calls.Store(e, struct{}{})
	// A call added as stop ends may come after the Range: it sees stop done.
	if stop.Err() != nil {
		cut(context.Cause(stop))
	}
	return func() { c.calls.Delete(e) }
}

// send is forward's part once the call has its slot.
func (f *Forwarder) send(ctx context.Context, up *child.Call, t *catalog.Tool, args json.RawMessage) (callAnswer, Outcome) {
	retried, at := false, stageStarting
	lostWhy := "" // why the first attempt's session went away, once retried
	c := f.child(t.Server)
	for {
		st, err := c.Ready(ctx)
		if err == nil && !f.pinning().StillPinned(st.Listed, t) {
			return callAnswer{}, OutcomeRefused
		}
		if err != nil {
			if errors.Is(err, child.ErrUnavailable) && retried {
				// The first attempt may have run: say so.
				return own(mcp.NewToolResultError(fmt.Sprintf(
					"server %s went away during the call to %s (%s); it was to be retried once, but %v",
					t.Server, t.Name, lostWhy, err))), OutcomeInterrupted
			}
			if errors.Is(err, child.ErrUnavailable) {
				return own(mcp.NewToolResultError(err.Error())), OutcomeUnavailable
			}
			return ownEnded(f.ctxEnded(ctx, up, t, at))
		}
		at, sess := stageSent, st.Session
		raw, isError, err := f.callChild(ctx, c, sess, up, t, args)
		if errors.Is(err, link.ErrMessageTooLarge) {
			// The child did callAnswer; the caller is told what became of it.
			return own(mcp.NewToolResultError(fmt.Sprintf(
				"the server's response to %s exceeded max_message_bytes (%s) and was dropped; the call reached the server",
				t.Orig, config.FormatSize(sess.Limit())))), OutcomeToolError
		}
		if err == nil {
			return f.relayResult(t, raw, isError, retried)
		}
		if hs, ok := errors.AsType[*link.HTTPStatusError](err); ok {
			// The one call failed; the body is not the caller's to see.
			text := fmt.Sprintf("server %s answered the call to %s with HTTP %d", t.Server, t.Name, hs.Code)
			if hs.Redirect {
				text += ", a redirect, which mcpmux does not follow"
			}
			return own(mcp.NewToolResultError(text)), OutcomeToolError
		}
		if ctx.Err() != nil {
			return ownEnded(f.ctxEnded(ctx, up, t, at))
		}
		if sess.Failed(ctx, err) {
			// The retry goes to the child in force for the alias now: the
			// same one restarting, or the one that replaced it (whose
			// Ready waits for its start); none for a server taken out.
			next := f.inForce(t.Server)
			if (t.ReadOnly || neverDelivered(err)) && !retried && next != nil {
				retried, lostWhy = true, sess.LostWhy()
				telemetry.Retried(ctx, next.Alias(), lostWhy)
				telemetry.Log(ctx, c.Log().Warn()).Str("tool", t.Name).Str("why", sess.LostWhy()).Bool("read_only", t.ReadOnly).
					Bool("replaced", next != c).Msg("server went away before answering; retrying once on its next session")
				c = next
				continue
			}
			retry := "it was not retried"
			switch {
			case retried:
				retry = "it was retried once and interrupted again"
			case next == nil:
				retry = "it was not retried: the server was taken out of the config"
			}
			return own(mcp.NewToolResultError(fmt.Sprintf(
				"server %s went away during the call to %s (%s); the call may or may not have taken effect, and %s",
				t.Server, t.Name, sess.LostWhy(), retry))), OutcomeInterrupted
		}
		// The child answered with a JSON-RPC error: tell the model what it said.
		return own(mcp.NewToolResultError(fmt.Sprintf("server %s refused the call to %s: %v", t.Server, t.Name, err))), OutcomeToolError
	}
}

// callChild is sess.CallTool, one request to c, in a client span of its
// own, and counted as a client operation.
func (f *Forwarder) callChild(ctx context.Context, c *child.Server, sess *child.Session, up *child.Call, t *catalog.Tool,
	args json.RawMessage) (json.RawMessage, bool, error) {
	begun := time.Now()
	cctx, span := f.tracing.Client(ctx, string(mcp.MethodToolsCall), t.Orig, t.Server, childTransport(c))
	raw, isError, err := sess.CallTool(cctx, up, t.Orig, args)
	et := clientErrorType(err, isError)
	telemetry.EndClient(span, et, err)
	f.observe.Operation(Operation{Client: true, Method: string(mcp.MethodToolsCall), Server: t.Server, ErrorType: et, Took: time.Since(begun)})
	return raw, isError, err
}

func ownEnded(r *mcp.CallToolResult, o Outcome) (callAnswer, Outcome) { return own(r), o }

// relayResult checks a child's result and prepares it to be relayed as it
// is, with the URIs of the child's resources in the form mcpmux exposes.
func (f *Forwarder) relayResult(t *catalog.Tool, raw json.RawMessage, isError, retried bool) (callAnswer, Outcome) {
	out, err := naming.RewriteURIs(raw, naming.ResultToolCall, linkRewriter(f.child(t.Server)))
	if err != nil {
		return own(mcp.NewToolResultError(fmt.Sprintf("server %s answered the call to %s with a malformed result: %v",
			t.Server, t.Name, err))), OutcomeToolError
	}
	switch {
	case retried:
		return callAnswer{raw: out}, OutcomeRetried
	case isError:
		return callAnswer{raw: out}, OutcomeToolError
	}
	return callAnswer{raw: out}, OutcomeOK
}

// neverDelivered reports errors that prove a remote child never received
// the call, which is then safe to send again even when it writes: a 404 for
// the session, a connection that could not be made, or one the server had
// closed before the call was written to it.
func neverDelivered(err error) bool {
	if errors.Is(err, transport.ErrSessionTerminated) || errors.Is(err, link.ErrNotSent) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// ctxEnded answers a call whose context ended at stage at: mcpmux
// stopping, the call timeout, or the caller cancelling.
func (f *Forwarder) ctxEnded(ctx context.Context, up *child.Call, t *catalog.Tool, at stage) (*mcp.CallToolResult, Outcome) {
	if errors.Is(context.Cause(ctx), ErrShuttingDown) {
		if at < stageSent {
			return mcp.NewToolResultError(fmt.Sprintf(
				"mcpmux is shutting down and cut off the call to %s before it was sent", t.Name)), OutcomeInterrupted
		}
		return mcp.NewToolResultError(fmt.Sprintf(
			"mcpmux is shutting down and cut off the call to %s; it may or may not have taken effect",
			t.Name)), OutcomeInterrupted
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		switch at {
		case stageQueued:
			return mcp.NewToolResultError(fmt.Sprintf(
				"the call to %s timed out after %s waiting for one of server %s's %d call slots; it was not sent",
				t.Name, taskTimeout(f.settings.Load().CallTimeout, up), t.Server, cap(f.admit.gate(f.child(t.Server)).slots))), OutcomeTimeout
		case stageStarting:
			return mcp.NewToolResultError(fmt.Sprintf(
				"the call to %s timed out after %s waiting for server %s to be ready; it was not sent",
				t.Name, taskTimeout(f.settings.Load().CallTimeout, up), t.Server)), OutcomeTimeout
		}
		return mcp.NewToolResultError(fmt.Sprintf(
			"the call to %s timed out after %s; server %s was told to cancel it",
			t.Name, taskTimeout(f.settings.Load().CallTimeout, up), t.Server)), OutcomeTimeout
	}
	return mcp.NewToolResultError("the call was cancelled by the client"), OutcomeCancelled
}

// DecisionHeld is the audit decision of a request for a tool or prompt
// held by pinning; the caller is told what it is told of an unknown name.
const DecisionHeld Decision = "held"

// errHeldSince is a request for a tool or prompt held by pinning since it
// was looked up (stillPinned).
var errHeldSince = errors.New("held by pinning since it was looked up")

// taskTimeout is how long a call may take: the call timeout, or for a
// call run as a task the ttl its client asked for, when that is longer.
func taskTimeout(callTimeout time.Duration, up *child.Call) time.Duration {
	d := callTimeout
	if tc := up.Task; tc != nil && tc.Params.TTL != nil {
		d = max(d, time.Duration(*tc.Params.TTL)*time.Millisecond)
	}
	return d
}

// WaitIdle waits until no call is being forwarded, or ctx ends. A drain
// on shutdown uses it, once no new calls can arrive.
func (f *Forwarder) WaitIdle(ctx context.Context) error {
	for f.inflight.Load() > 0 {
		select {
		case <-f.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Cut ends every call still in flight, now and from now on; each is
// answered with an error result naming cause (ErrShuttingDown on shutdown).
func (f *Forwarder) Cut(cause error) { f.cutCalls(cause) }

// ErrShuttingDown is the cause given to calls cut off because mcpmux is
// stopping; their callers are told so.
var ErrShuttingDown = errors.New("mcpmux is shutting down")
