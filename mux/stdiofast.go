package mux

// The stdio fast path: a plain tools/call line of an initialized session is
// answered at the edge, without mcp-go, which would decode it about five
// times, start a goroutine for it and encode a placeholder for the result.
// "Plain" is narrow on purpose: exactly the members jsonrpc ("2.0"), id (a
// small unsigned integer or a string nothing in it is escaped), method
// ("tools/call") and params, each once and spelt exactly so; params holds
// name (a string without escapes), optionally arguments (any value whose
// numbers fit a float64) and, for a 2026-07-28 request, _meta, and nothing
// else. A _meta is taken only as mcp-go's client writes it on a plain
// call: the protocol version (one mcp-go serves as 2026-07-28), the client
// capabilities, and optionally the client info and log level, nothing else
// (no progressToken); capabilities that declare sampling, elicitation or
// roots make the call one that may take rounds (rounds.go), which stays
// mcp-go's. For such a line encoding/json, mcp-go's decoder, reads exactly
// what this one scan reads, so the call and its answer are the slow path's
// byte for byte: the child's raw result spliced as swapRelayed would splice
// it, mcpmux's own results and refusals encoded with mcp-go's types, and a
// 2026-07-28 request served as mcp-go's HandleMessage serves it (its
// RequestProtocolInfo in the context, the client's info and capabilities
// recorded on the session, the result decorated as decorateResponse does).
// Everything else (progress tokens, task, requestState and inputResponses,
// any other _meta, a tool that requires a task, a line before initialize
// or before the first catalog, a line once the session is ending,
// or one while fastPathWorkers calls are in flight) goes to mcp-go as
// before.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// fastPathWorkers bounds the calls the fast path runs at once, as mcp-go's
// worker pool bounds its own; more go to mcp-go, which queues them. The two
// bounds add up: a session runs up to 2*stdioWorkers calls at once, this
// many on the fast path and as many in mcp-go's pool.
const fastPathWorkers = stdioWorkers

// fastPath runs the plain calls of one stdio session. Its goroutines are
// its own: ServeStdio stops them (stop) and waits for them once mcp-go's
// Listen has returned.
type fastPath struct {
	m *Mux
	h *halfClose
	// base is the context mcp-go gives the session's handlers (identity,
	// relay slots, direct writer, the ClientSession); set by Listen before
	// it reads a line, nil until then.
	base context.Context
	stop context.CancelFunc // ends every call's context
	sem  chan struct{}
	wg   sync.WaitGroup
	// metaRaw is the last 2026-07-28 _meta a fast call carried, as the
	// client wrote it, and metaInfo what mcp-go reads from it: a client
	// writes the same _meta on every call, which is then decoded once.
	// Only the reader (take) uses them.
	metaRaw  []byte
	metaInfo *server.RequestProtocolInfo
	// decorated is a placeholder's result as mcp-go writes it for a
	// 2026-07-28 request; holder, its members, and holderMeta, those of
	// its _meta (the bytes decoratedMeta), for spliceDecorated.
	decorated, decoratedMeta []byte
	holder, holderMeta       jsonwire.Object
	// calls are the fast calls in flight by id (canonical form), for the
	// client's notifications/cancelled; only this session takes mu.
	mu     sync.Mutex
	calls  map[string]*fastCall
	closed bool          // no call starts once close has begun
	taken  *atomic.Int64 // counts the calls taken, if not nil (tests)
}

// fastCall is one plain tools/call.
type fastCall struct {
	key  string // the id in canonical form (halfClose's)
	id   []byte // as the client wrote it
	name string
	args any    // json.RawMessage, or nil without arguments
	meta []byte // the _meta as written, nil without one
	// info is what mcp-go reads from meta, for a 2026-07-28 request; nil
	// for an earlier one.
	info   *server.RequestProtocolInfo
	cancel context.CancelFunc
}

func newFastPath(m *Mux, h *halfClose) *fastPath {
	f := &fastPath{m: m, h: h, sem: make(chan struct{}, fastPathWorkers)}
	// What park leaves in a placeholder (a slot's number), decorated.
	ph := relayToolResult(nil)
	ph.Meta.AdditionalFields[relayKey] = uint64(1)
	decorate(ph)
	f.decorated, _ = json.Marshal(ph)
	f.holder, _ = jsonwire.Members(f.decorated)
	meta := f.holder.Only("_meta")
	f.decoratedMeta = f.decorated[meta.Start:meta.End]
	f.holderMeta, _ = jsonwire.Members(f.decoratedMeta)
	return f
}

// serverInfo is the serverInfo mcp-go puts in a 2026-07-28 result's _meta:
// the name and version newServer gives mcp-go's server.
func serverInfo() mcp.Implementation { return mcp.Implementation{Name: "mcpmux", Version: Version} }

// decorate does to res what mcp-go's decorateResult does to a tools/call
// result of a 2026-07-28 request.
func decorate(res *mcp.CallToolResult) {
	if res.GetResultType() == "" {
		res.SetResultType(mcp.ResultTypeComplete)
	}
	if meta := res.EnsureResultMeta(); meta.ServerInfo() == nil {
		meta.SetServerInfo(serverInfo())
	}
}

// listening is Listen's context function: it keeps the handlers' context.
func (f *fastPath) listening(ctx context.Context) context.Context {
	ctx, f.stop = context.WithCancel(ctx)
	f.base = ctx
	return ctx
}

// end starts no call from now on and ends the fast calls in flight: the
// reader calls it when the input ends, when mcp-go cancels its own requests.
// The calls' common context is not cancelled here: Listen runs on it.
func (f *fastPath) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, c := range f.calls {
		c.cancel()
	}
}

// close ends every fast call's context, once Listen has returned, and
// waits for their answers.
func (f *fastPath) close() {
	f.end()
	if f.stop != nil {
		f.stop()
	}
	f.wg.Wait()
}

// take starts line, a request read under key, as a fast call, and reports
// whether it did; if not, the line goes to mcp-go.
func (f *fastPath) take(line []byte, key string) bool {
	if f.base == nil || !bytes.Contains(line, toolsCallNeedle) {
		return false
	}
	cs := server.ClientSessionFromContext(f.base)
	if cs == nil || !cs.Initialized() {
		return false
	}
	c, ok := plainCall(bytes.Clone(line))
	if !ok {
		return false
	}
	if c.meta != nil {
		if c.info, ok = f.protocolInfo(c.meta); !ok {
			return false
		}
	}
	select {
	case <-f.m.initial:
	default:
		// Before the first catalog nothing tells whether the tool requires
		// a task: mcp-go's before-call hook waits for it.
		return false
	}
	if e, ok := f.m.catalog.Load().lookup(kindTool, c.name); ok && e.task == mcp.TaskSupportRequired {
		return false // mcp-go refuses it without a task
	}
	select {
	case f.sem <- struct{}{}:
	default:
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.base.Err() != nil {
		// The session is ending: mcp-go, whose reader may still be
		// waiting for a line, would not run it either.
		<-f.sem
		return false
	}
	c.key = key
	var ctx context.Context
	ctx, c.cancel = context.WithCancel(f.base)
	if c.info != nil {
		// The handler's context needs no clientMeta (withClientMeta): a
		// _meta of the protocol's keys alone leaves childMeta nothing and
		// clientToken no token.
		ctx = server.WithRequestProtocolInfo(ctx, c.info)
	}
	if f.calls == nil {
		f.calls = map[string]*fastCall{}
	}
	f.calls[key] = c // as mcp-go's own table, the latest of an id is the one cancelled
	if f.taken != nil {
		f.taken.Add(1)
	}
	f.wg.Add(1)
	go f.serve(ctx, c)
	return true
}

// cancelled cancels the fast call in flight under key, if there is one.
func (f *fastPath) cancelled(key string) {
	f.mu.Lock()
	c := f.calls[key]
	f.mu.Unlock()
	if c != nil {
		c.cancel()
	}
}

func (f *fastPath) serve(ctx context.Context, c *fastCall) {
	defer f.wg.Done()
	defer func() { <-f.sem }()
	defer c.cancel()
	defer func() {
		f.mu.Lock()
		if f.calls[c.key] == c {
			delete(f.calls, c.key)
		}
		f.mu.Unlock()
	}()
	if c.info != nil {
		recordOnSession(server.ClientSessionFromContext(ctx), c.info)
	}
	msg := f.answer(ctx, c)
	aw := f.h.out
	if msg.raw != nil {
		aw.answer(c.key, msg.raw)
		return
	}
	b, err := json.Marshal(msg.typed)
	if err != nil {
		b, _ = json.Marshal(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: c.requestID(),
			Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR, err.Error(), nil)})
	}
	// Through Write, as mcp-go's answer would go, for the same edge work.
	_, _ = aw.Write(append(b, '\n'))
}

// fastAnswer is a call's answer: raw, the whole message, or typed, a
// message to encode as mcp-go does.
type fastAnswer struct {
	raw   []byte
	typed any
}

// answer runs the call as mcp-go's dispatch and the mux's handler would
// for a plain request once the first catalog is out (take): the tool
// filter, CallTool, toolAnswer.
func (f *fastPath) answer(ctx context.Context, c *fastCall) (a fastAnswer) {
	defer func() {
		if r := recover(); r != nil { // as server.WithRecovery answers
			a = fastAnswer{typed: mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: c.requestID(),
				Error: mcp.NewJSONRPCErrorDetails(mcp.INTERNAL_ERROR,
					fmt.Sprintf("panic recovered in %s tool handler: %v", c.name, r), nil)}}
		}
	}()
	if e, ok := f.m.catalog.Load().lookup(kindTool, c.name); !ok || !f.m.viewerOf(ctx).sees(e) {
		// mcp-go's tool filter (filterTools) refuses it before the
		// handler, and its error hook writes the audit line.
		f.m.classifyRefusal(ctx, c.name)
		return fastAnswer{typed: mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: c.requestID(),
			Error: mcp.NewJSONRPCErrorDetails(mcp.INVALID_PARAMS,
				fmt.Sprintf("tool '%s' not found: %v", c.name, server.ErrToolNotFound), nil)}}
	}
	r := f.m.CallTool(ctx, IdentityFrom(ctx), c.name, c.args)
	switch {
	case r.Raw != nil && c.info != nil:
		return fastAnswer{raw: f.spliced(c, r.Raw)}
	case r.Raw != nil:
		// What swapRelayed makes of the placeholder mcp-go would write.
		msg := make([]byte, 0, len(answerHead)+len(c.id)+len(resultHead)+len(r.Raw)+2)
		msg = append(msg, answerHead...)
		msg = append(msg, c.id...)
		msg = append(msg, resultHead...)
		msg = append(msg, r.Raw...)
		return fastAnswer{raw: append(msg, '}', '\n')}
	}
	res := toolAnswer(r, c.name) // the handler's answer for what has no raw result
	if c.info != nil {
		decorate(res)
	}
	return fastAnswer{typed: mcp.NewJSONRPCResultResponse(c.requestID(), res)}
}

// spliced is what swapRelayedFrom makes of the decorated placeholder
// mcp-go writes for a 2026-07-28 call answered with raw.
func (f *fastPath) spliced(c *fastCall, raw json.RawMessage) []byte {
	msg := make([]byte, 0, len(answerHead)+len(c.id)+len(resultHead)+len(f.decorated)+2)
	msg = append(msg, answerHead...)
	msg = append(msg, c.id...)
	msg = append(msg, resultHead...)
	result := jsonwire.Member{Start: len(msg), End: len(msg) + len(f.decorated)}
	msg = append(msg, f.decorated...)
	msg = append(msg, '}')
	if pObj, ok := jsonwire.Members(raw); ok { // not: mcp-go's placeholder, as swapRelayedFrom leaves it
		msg = spliceDecorated(msg, &result, f.holder, f.holderMeta, f.decoratedMeta, raw, pObj)
	}
	return append(msg, '\n')
}

// protocolInfo returns what mcp-go's extractRequestProtocolInfo reads from
// raw, the _meta of a plain call, when the call is one the fast path
// serves as 2026-07-28 (see the top of the file); ok is false otherwise.
// Each call gets its own RequestProtocolInfo, as from mcp-go.
func (f *fastPath) protocolInfo(raw []byte) (_ *server.RequestProtocolInfo, ok bool) {
	if f.metaInfo == nil || !bytes.Equal(raw, f.metaRaw) {
		info, ok := readMeta(raw)
		if !ok {
			return nil, false
		}
		f.metaRaw, f.metaInfo = bytes.Clone(raw), info
	}
	info := *f.metaInfo
	return &info, true
}

// readMeta is protocolInfo's reading of raw, with mcp-go's own decoding and
// accessors.
func readMeta(raw []byte) (*server.RequestProtocolInfo, bool) {
	obj, ok := jsonwire.Members(raw)
	if !ok {
		return nil, false
	}
	seen := 0
	for _, m := range obj.Members {
		bit := 0
		switch m.Key {
		case mcp.MetaKeyProtocolVersion:
			bit = 1
		case mcp.MetaKeyClientCapabilities:
			bit = 2
		case mcp.MetaKeyClientInfo:
			bit = 4
		case mcp.MetaKeyLogLevel:
			bit = 8
		}
		if bit == 0 || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
	}
	var meta mcp.Meta
	if seen&3 != 3 || json.Unmarshal(raw, &meta) != nil {
		return nil, false
	}
	version := meta.ProtocolVersion()
	caps := meta.ClientCapabilities()
	if !mcp.IsModernProtocol(version) || !mcp.IsValidProtocolVersion(version) || caps == nil || declaresRounds(caps) {
		return nil, false // an error of mcp-go's, or a call that may take rounds (wantsRound)
	}
	return &server.RequestProtocolInfo{Modern: true, ProtocolVersion: version, ClientInfo: meta.ClientInfo(),
		ClientCapabilities: caps, LogLevel: meta.LogLevel()}, true
}

// recordOnSession is mcp-go's applyRequestProtocolInfoToSession for a
// session already initialized (take's condition): a 2026-07-28 request
// records its client's info and capabilities on the session.
func recordOnSession(cs server.ClientSession, info *server.RequestProtocolInfo) {
	if withInfo, ok := cs.(server.SessionWithClientInfo); ok {
		if info.ClientInfo != nil {
			withInfo.SetClientInfo(*info.ClientInfo)
		}
		withInfo.SetClientCapabilities(*info.ClientCapabilities)
	}
}

// requestID is the call's id as mcp-go holds it: decoded into an any.
func (c *fastCall) requestID() mcp.RequestId {
	if c.id[0] == '"' {
		return mcp.NewRequestId(string(c.id[1 : len(c.id)-1]))
	}
	f, _ := strconv.ParseFloat(string(c.id), 64)
	return mcp.NewRequestId(f)
}

var (
	answerHead      = []byte(`{"jsonrpc":"2.0","id":`)
	resultHead      = []byte(`,"result":`)
	toolsCallNeedle = []byte(`"tools/call"`)
)

// plainCall reads line, a request requestID accepted (valid JSON), as a
// plain tools/call; ok is false for anything else. The call's fields are
// slices of line.
func plainCall(line []byte) (_ *fastCall, ok bool) {
	top, ok := jsonwire.Members(line)
	if !ok || len(top.Members) != 4 {
		return nil, false
	}
	var params []byte
	c := &fastCall{}
	seen := 0
	for _, m := range top.Members {
		v := line[m.Start:m.End]
		switch m.Key {
		case "jsonrpc":
			seen |= 1
			ok = string(v) == `"`+mcp.JSONRPC_VERSION+`"`
		case "id":
			seen |= 2
			ok = jsonwire.PlainInteger(v) || jsonwire.PlainIDJSON(v)
			c.id = v
		case "method":
			seen |= 4
			ok = string(v) == `"tools/call"`
		case "params":
			seen |= 8
			params = v
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	if seen != 15 {
		return nil, false
	}
	p, ok := jsonwire.Members(params)
	if !ok || len(p.Members) == 0 || len(p.Members) > 3 {
		return nil, false
	}
	named := false
	for _, m := range p.Members {
		v := params[m.Start:m.End]
		switch {
		case m.Key == "name" && !named:
			if v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
				return nil, false
			}
			named, c.name = true, string(v[1:len(v)-1])
		case m.Key == "arguments" && c.args == nil:
			if !jsonwire.NumbersFit(v) {
				return nil, false // mcp-go fails to decode it
			}
			c.args = json.RawMessage(v)
		case m.Key == "_meta" && c.meta == nil:
			c.meta = v
		default:
			return nil, false
		}
	}
	return c, named
}
