package pipeline

// Rounds (protocol 2026-07-28, multi round-trip requests): a 2026-07-28
// client takes no requests from a server, so a child's sampling/createMessage,
// elicitation/create or roots/list during such a client's tools/call,
// prompts/get or resources/read is handed to the client in an input-required
// result instead, and the client's retry of the request (inputResponses,
// requestState) carries the answers back.
//
// The child is spoken to at 2025-11-25 and knows nothing of this: its call
// goes on while the client answers. A round owns that call: its goroutine
// runs the call detached from the upstream request, bounded by call_timeout
// from the first request and ended by Mux.Close; the child's requests wait
// in the round for the client's answers. Each upstream request of the round
// (the first, then every retry) is attached to the round while it waits:
// progress and log messages of the child reach it, and between rounds they
// are dropped. A round waiting for its retry is in the table under its
// requestState, which is single use; correlation of the child's traffic
// with the call stays in the in-flight table (package child), whose entry for
// the call points at its round.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// errUnknownState is the answer to a retry whose requestState names no
// round this caller may resume: unknown, expired, already used, of another
// identity, of another kind of request or of another tool, prompt or URI.
// unknownState words it for the client.
var errUnknownState = errors.New("requestState is unknown or expired")

// errRetryRefused ends a round whose retry the policy refused; the retry
// is refused as one for a name that does not exist.
var errRetryRefused = errors.New("the policy no longer allows it")

// errRequestGone ends a round whose upstream request ended while waiting.
var errRequestGone = errors.New("the client's request ended")

// errNotRetried ends a round whose work has its answer but whose client
// did not retry within resultHold.
var errNotRetried = errors.New("the client did not retry for the answer")

// Bounds of rounds. A round that asked the client something holds its
// child call's max_in_flight slot (the child is still working on it) and
// its state until the client retries or call_timeout passes; these keep a
// client that never retries from holding more.
const (
	// maxRoundsWaiting is how many rounds that asked the client something
	// mcpmux holds at once, for all identities together.
	maxRoundsWaiting = 1000
	// MaxRoundAsks is how many of a child's requests one round holds for
	// the client's answers at once.
	MaxRoundAsks = 16
	// resultHold is how long a round whose work has its answer waits for
	// the client's retry (at most call_timeout from the first request).
	resultHold = 30 * time.Second
)

// roundsPerServer is how many rounds that asked the client something one
// identity holds of server c at once: half its max_in_flight, at least
// one, so that one identity's unanswered rounds never take all its slots.
func roundsPerServer(c *child.Server) int64 { return max(1, int64(c.Config().MaxInFlight)/2) }

// roundsClosed marks roundTable.running once Mux.Close has begun.
const roundsClosed = int64(1) << 62

// roundTable holds the rounds waiting for a retry, counts the goroutines
// of all rounds, which Mux.Close waits for, and the rounds that asked the
// client something, which the bounds above cap.
type roundTable struct {
	byToken sync.Map      // requestState -> *round
	running atomic.Int64  // goroutines, plus roundsClosed once closed
	idle    chan struct{} // cap 1: a token when running drops to zero
	waiting atomic.Int64  // rounds that asked, of every identity
	held    sync.Map      // identity + "\x00" + alias -> *atomic.Int64; -1 once dropped
	// seal, when not nil, turns each requestState into the one handed out
	// (sealed to name this replica as its owner, with several).
	seal func(local string) string
	// holdFor is resultHold; tests shorten it.
	holdFor time.Duration
	log     zerolog.Logger // tells of a child's request a bound refused

	// What a round's call takes of the pipeline: its time, its cut at
	// shutdown (callCuts.add), and the audit of a retry whose state is
	// unknown.
	settings *atomic.Pointer[Settings]
	addCut   func(cut context.CancelCauseFunc) (remove func())
	unknown  func(ctx context.Context, method mcp.MCPMethod, name string)
}

// round is one request of a 2026-07-28 client's (tools/call, prompts/get or
// resources/read) whose child may ask the client for input.
type round struct {
	rt       *roundTable
	identity string
	method   mcp.MCPMethod // the kind of request
	name     string        // the exposed tool or prompt name, or the exposed URI
	// ctx is the child call's: the first request's caller, not its end;
	// end ends it, and with it the round.
	ctx  context.Context
	end  context.CancelCauseFunc
	done chan struct{} // closed once answer is set
	// answer is the handler's answer to the request, once the work ended.
	answer roundAnswer
	wake   chan struct{} // cap 1: a child request joined pending

	mu      sync.Mutex
	up      *upstream.Attachment // the upstream request waiting now; nil between rounds
	last    *upstream.Attachment // the latest upstream request: its capabilities count
	call    *child.InCall        // the child call's in-flight entry (the latest attempt)
	token   string               // the requestState handed out last; "" once taken
	pending []*childAsk          // child requests not yet handed to the client
	asked   map[string]*childAsk
	keys    int
	heldKey string // the key of roundTable.held this round counts under; "" if none
	over    bool   // the round has ended: it takes no reservation
}

// childAsk is one request of the child's waiting for the client's answer.
type childAsk struct {
	method string
	params json.RawMessage // nil when the child sent none
	reply  chan askReply   // cap 1
}

type askReply struct {
	result json.RawMessage
	err    string // the child gets an error saying this when not ""
}

// roundWork is the work of a request at its child, run detached from the
// request, as the call up: it returns the request's answer and writes its
// one audit line.
type roundWork func(ctx context.Context, up *child.Call) answer

// roundAnswer is what an upstream request of a round is answered with:
// inputRequired when not nil, else value or err. err is errUnknownState or
// errRetryRefused when the retry named no round it may resume.
type roundAnswer struct {
	inputRequired json.RawMessage
	value         answer
	err           error
}

// UnknownState is the text of errUnknownState for a retry of method: what
// the client can do about it.
func UnknownState(method mcp.MCPMethod) string {
	again := map[mcp.MCPMethod]string{mcp.MethodToolsCall: "call the tool", mcp.MethodPromptsGet: "get the prompt",
		mcp.MethodResourcesRead: "read the resource"}[method]
	return errUnknownState.Error() + "; " + again + " again without it"
}

// serve answers a request (method, for the exposed name) that takes
// rounds: a 2026-07-28 retry resumes the round its requestState names, and
// a first request of a client that declared a capability for the child's
// requests starts one running work. allowed says whether the policy lets
// the caller make the request now (asked only of a request that may take
// a round); a retry it refuses ends its round. ok
// is false for a request that takes no round (the handler answers it as
// any other), and for a refused retry that names no round of the caller's
// (refused like any request for the name).
func (rt *roundTable) serve(ctx context.Context, req *upstream.Request, method mcp.MCPMethod, name string, allowed func() bool, work roundWork) (_ roundAnswer, ok bool) {
	if state := req.Params.RequestState; state != "" && req.Modern() {
		r := rt.take(state, upstream.IdentityFrom(ctx), method, name)
		ok := allowed()
		switch {
		case !ok && r == nil:
			return roundAnswer{}, false
		case !ok:
			r.end(errRetryRefused)
			return roundAnswer{err: errRetryRefused}, true
		case r == nil:
			rt.unknown(ctx, method, name)
			return roundAnswer{err: errUnknownState}, true
		}
		telemetry.LinkToRound(ctx, r.ctx)
		// Attached first: what the child sends once answered is this retry's.
		r.attach(req.Attachment(ctx))
		r.answerAsks(req.Params.InputResponses)
		return r.await(ctx), true
	}
	if !wantsRound(req) || !allowed() {
		return roundAnswer{}, false
	}
	r := rt.start(ctx, req, method, name, work)
	if r == nil {
		return roundAnswer{}, false
	}
	return r.await(ctx), true
}

// wantsRound reports whether a request is to run as a round: a 2026-07-28
// request of a client that declared sampling, elicitation or roots. Any
// other client's request runs as today, and a child's request during it is
// relayed (earlier clients) or refused as undeclared.
func wantsRound(req *upstream.Request) bool {
	p := req.Meta.Protocol
	return p.Modern && p.Caps != nil && declaresRounds(p.Caps)
}

// declaresRounds reports whether a 2026-07-28 client with capabilities c
// has its requests run as rounds (wantsRound).
func declaresRounds(c *mcp.ClientCapabilities) bool {
	return c.Sampling != nil || c.Elicitation != nil || c.Roots != nil
}

// start starts work for ctx's request (which carries the client's
// _meta) as a round, attached to that request, and returns it. The round's
// goroutine ends when the work does; the round itself when its answer is
// handed out, its retry is refused, its upstream request ends while
// waiting, call_timeout passes since now, its answer waits resultHold for
// a retry, or mcpmux stops. It returns nil once Mux.Close has begun: the
// request then runs as one without rounds, and is cut as any other.
func (rt *roundTable) start(ctx context.Context, req *upstream.Request, method mcp.MCPMethod, name string, work roundWork) *round {
	if !rt.enter() {
		return nil
	}
	r := &round{rt: rt, identity: upstream.IdentityFrom(ctx), method: method, name: name,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	// The call outlives the request: what it sends goes through whichever
	// request is attached, never through this one's writer.
	timed, stopTimer := context.WithTimeout(context.WithoutCancel(ctx), rt.settings.Load().CallTimeout)
	rctx, cancel := context.WithCancelCause(timed)
	stopCut := rt.addCut(cancel)
	r.end = cancel // the AfterFunc below stops the timer and the cut
	r.ctx = rctx
	// However the round ends, its state is forgotten and its child requests
	// answered (ask watches ctx).
	context.AfterFunc(r.ctx, func() {
		r.mu.Lock()
		tok, held := r.token, r.heldKey
		r.token, r.heldKey, r.over = "", "", true
		r.mu.Unlock()
		if tok != "" {
			r.rt.byToken.CompareAndDelete(tok, r)
		}
		if held != "" {
			r.rt.unhold(held)
		}
		stopTimer()
		stopCut()
	})
	r.attach(req.Attachment(ctx))
	up := &child.Call{Identity: r.identity, Round: r, Meta: req.Meta}
	go func() {
		defer r.rt.finished()
		r.answer = roundAnswer{value: work(r.ctx, up)}
		close(r.done)
		// Answered between rounds: the answer waits a while for the retry,
		// not all of call_timeout.
		if r.Attached() == nil {
			t := time.AfterFunc(r.rt.resultHold(), func() { r.end(errNotRetried) })
			context.AfterFunc(r.ctx, func() { t.Stop() })
		}
	}()
	return r
}

func (rt *roundTable) resultHold() time.Duration {
	if rt.holdFor > 0 {
		return rt.holdFor
	}
	return resultHold
}

// enter counts a new round's goroutine; false once close has begun.
func (rt *roundTable) enter() bool {
	for {
		n := rt.running.Load()
		if n&roundsClosed != 0 {
			return false
		}
		if rt.running.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (rt *roundTable) finished() {
	if rt.running.Add(-1)&^roundsClosed == 0 {
		select {
		case rt.idle <- struct{}{}:
		default:
		}
	}
}

// wait refuses new rounds and returns once no round's call is running;
// Mux.Close calls it after cutting every call.
func (rt *roundTable) wait() {
	rt.running.Or(roundsClosed)
	for rt.running.Load()&^roundsClosed > 0 {
		<-rt.idle
	}
}

// hold reserves a place for a round of identity at server c among those
// that asked the client something; it says which bound refuses it if none
// is left.
func (rt *roundTable) hold(identity string, c *child.Server) (key string, refused string) {
	for {
		n := rt.waiting.Load()
		if n >= maxRoundsWaiting {
			return "", fmt.Sprintf("mcpmux holds %d calls waiting for their clients' answers, the most it holds", n)
		}
		if rt.waiting.CompareAndSwap(n, n+1) {
			break
		}
	}
	key = identity + "\x00" + c.Alias()
	limit := roundsPerServer(c)
	for {
		v, _ := rt.held.LoadOrStore(key, new(atomic.Int64))
		count := v.(*atomic.Int64)
		n := count.Load()
		switch {
		case n < 0: // dropped as it reached zero: a fresh one replaces it
			rt.held.CompareAndDelete(key, count)
			continue
		case n >= limit:
			rt.waiting.Add(-1)
			return "", fmt.Sprintf("identity %q has %d calls of server %s waiting for its answers, the most it may (half the server's max_in_flight)", identity, n, c.Alias())
		}
		if count.CompareAndSwap(n, n+1) {
			return key, ""
		}
	}
}

// unhold gives back a place hold reserved.
func (rt *roundTable) unhold(key string) {
	rt.waiting.Add(-1)
	v, ok := rt.held.Load(key)
	if !ok {
		return
	}
	count := v.(*atomic.Int64)
	if count.Add(-1) == 0 && count.CompareAndSwap(0, -1) {
		rt.held.CompareAndDelete(key, count)
	}
}

// take removes and returns the round waiting under token if it belongs to
// identity, the kind of request and the exposed name; nil otherwise,
// leaving another's round alone.
func (rt *roundTable) take(token, identity string, method mcp.MCPMethod, name string) *round {
	v, ok := rt.byToken.Load(token)
	if !ok {
		return nil
	}
	r := v.(*round)
	if r.identity != identity || r.method != method || r.name != name || !rt.byToken.CompareAndDelete(token, r) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.token != token || r.ctx.Err() != nil {
		return nil // ended meanwhile
	}
	r.token = ""
	return r
}

// await answers ctx's request, attached to r, with what comes first:
// the work's answer, or an input-required result with every child request
// pending (the round then waits for its retry). If the request ends first,
// so does the work.
func (r *round) await(ctx context.Context) roundAnswer {
	for {
		select {
		case <-r.done:
			r.detach()
			r.end(nil)
			return r.answer
		case <-r.wake:
			select {
			case <-r.done: // the answer wins: the loop takes it
				continue
			default:
			}
			if raw, ok := r.handOut(); ok {
				return roundAnswer{inputRequired: raw}
			}
		case <-ctx.Done():
			r.detach()
			r.end(errRequestGone)
			<-r.done
			return r.answer
		}
	}
}

// attach makes a the request the round's notifications reach.
func (r *round) attach(a *upstream.Attachment) {
	r.mu.Lock()
	r.up, r.last = a, a
	r.mu.Unlock()
}

// detach drops the attached request, once what was queued for it is
// written: what the child sends from now on is dropped until the next.
func (r *round) detach() {
	r.mu.Lock()
	r.up = nil
	c := r.call
	r.mu.Unlock()
	if c != nil {
		c.Flush()
	}
}

// Bind makes c the round's call: the latest attempt of the child call.
func (r *round) Bind(c *child.InCall) {
	r.mu.Lock()
	r.call = c
	r.mu.Unlock()
}

// Attached returns the upstream request waiting now, or nil.
func (r *round) Attached() *upstream.Attachment {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

// handOut detaches the request and returns the input-required result for
// every pending child request, the round then waiting for its retry under
// a fresh requestState; false when none is pending.
func (r *round) handOut() (json.RawMessage, bool) {
	r.mu.Lock()
	// A round that ended meanwhile hands out nothing: its request is
	// answered with the call's own outcome.
	if len(r.pending) == 0 || r.ctx.Err() != nil {
		r.mu.Unlock()
		return nil, false
	}
	asks := r.pending
	r.pending = nil
	r.asked = make(map[string]*childAsk, len(asks))
	keys := make([]string, len(asks))
	for i, a := range asks {
		r.keys++
		keys[i] = strconv.Itoa(r.keys)
		r.asked[keys[i]] = a
	}
	// 130 random bits: nobody guesses another's.
	tok := rand.Text()
	if r.rt.seal != nil {
		tok = r.rt.seal(tok)
	}
	r.token = tok
	r.mu.Unlock()
	r.detach()
	r.rt.byToken.Store(tok, r)
	if r.ctx.Err() != nil { // it ended meanwhile: the token must not stay
		r.rt.byToken.CompareAndDelete(tok, r)
		return nil, false
	}
	return inputRequired(keys, asks, tok), true
}

// inputRequired encodes the input-required result asking for asks under
// keys, with the child's params as they arrived.
func inputRequired(keys []string, asks []*childAsk, token string) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"resultType":"input_required","inputRequests":{`)
	for i, a := range asks {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(keys[i])
		method, _ := json.Marshal(a.method)
		fmt.Fprintf(&b, `%s:{"method":%s`, k, method)
		if a.params != nil {
			b.WriteString(`,"params":`)
			b.Write(a.params)
		}
		b.WriteByte('}')
	}
	tok, _ := json.Marshal(token)
	fmt.Fprintf(&b, `},"requestState":%s}`, tok)
	return b.Bytes()
}

// answerAsks hands each request of the last input-required result its
// response, as the client sent it; one without a response gets an error.
func (r *round) answerAsks(raw []byte) {
	var responses map[string]json.RawMessage
	_ = json.Unmarshal(raw, &responses) // an object, or none (ReadParams)
	r.mu.Lock()
	asked := r.asked
	r.asked = nil
	r.mu.Unlock()
	for key, a := range asked {
		rep := askReply{err: fmt.Sprintf("the client's retry carried no response to %s (inputResponses key %q)", a.method, key)}
		if raw, ok := responses[key]; ok {
			if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
				rep.err = fmt.Sprintf("the client answered %s with something other than a JSON object", a.method)
			} else {
				rep = askReply{result: raw}
			}
		}
		a.reply <- rep
	}
}

// Ask is childHost.Request for a call of r at c: req waits in the round for the
// client's answer, until the round or the child's wait (ctx) ends. A
// round over a bound (maxRoundsWaiting, roundsPerServer, maxRoundAsks)
// refuses it at once, and the call goes on as without rounds.
func (r *round) Ask(ctx context.Context, c *child.Server, req transport.JSONRPCRequest) *transport.JSONRPCResponse {
	fail := func(code int, format string, args ...any) *transport.JSONRPCResponse {
		return transport.NewJSONRPCErrorResponse(req.ID, code, fmt.Sprintf(format, args...), nil)
	}
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if missing := MissingCapability(last, mcp.MCPMethod(req.Method)); missing != "" {
		return RefuseMissing(req, c, missing)
	}
	a := &childAsk{method: req.Method, reply: make(chan askReply, 1)}
	if req.Params != nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(req.Params); err != nil {
			return fail(mcp.INVALID_PARAMS, "%v: %v", errBadChildParams, err)
		}
		a.params = bytes.TrimSpace(b.Bytes())
		if len(a.params) == 0 || a.params[0] != '{' {
			return fail(mcp.INVALID_PARAMS, "%v: params of %s must be an object", errBadChildParams, req.Method)
		}
	}
	r.mu.Lock()
	refused := ""
	if n := len(r.pending) + len(r.asked); n >= MaxRoundAsks {
		refused = fmt.Sprintf("the call has %d requests waiting for the client's answers, the most it may", n)
	} else if r.heldKey == "" && !r.over {
		r.heldKey, refused = r.rt.hold(r.identity, c)
	}
	if refused != "" {
		r.mu.Unlock()
		r.rt.log.Warn().Ctx(r.ctx).Str("identity", r.identity).Str("server", c.Alias()).Str("method", req.Method).Msg("a request of the server's was refused: " + refused)
		return fail(mcp.INTERNAL_ERROR, "mcpmux cannot hand %s to the client: %s", req.Method, refused)
	}
	r.pending = append(r.pending, a)
	r.mu.Unlock()
	span := telemetry.Relayed(r.ctx, req.Method, c.Alias())
	select {
	case r.wake <- struct{}{}:
	default:
	}
	select {
	case rep := <-a.reply:
		if rep.err != "" {
			telemetry.EndClient(span, "_OTHER", errors.New(rep.err))
			return fail(mcp.INTERNAL_ERROR, "%s", rep.err)
		}
		telemetry.EndClient(span, "", nil)
		return transport.NewJSONRPCResultResponse(req.ID, rep.result)
	case <-r.ctx.Done():
		r.forget(a)
		telemetry.EndClient(span, "cancelled", context.Cause(r.ctx))
		return fail(mcp.INTERNAL_ERROR, "the client did not answer %s: the call ended (%v)", req.Method, context.Cause(r.ctx))
	case <-ctx.Done():
		r.forget(a)
		telemetry.EndClient(span, "cancelled", ctx.Err())
		return fail(mcp.INTERNAL_ERROR, "the client did not answer %s: %v", req.Method, ctx.Err())
	}
}

// forget drops a, which nobody waits for any more.
func (r *round) forget(a *childAsk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.pending {
		if p == a {
			r.pending = append(r.pending[:i:i], r.pending[i+1:]...)
			return
		}
	}
	for k, p := range r.asked {
		if p == a {
			delete(r.asked, k)
		}
	}
}
