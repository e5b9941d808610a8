package mux

// The relay: mcp-go carries, mcpmux answers. A result mcpmux relays is made
// by mcpmux as raw JSON and handed to mcp-go inside a typed placeholder whose
// _meta holds it under relayKey; at the upstream edge (answerWriter for
// stdio, recorder for HTTP) swapRelayed puts the raw result in the
// placeholder's place before the bytes leave. mcp-go's typed results would
// drop what must pass unchanged (unknown fields, annotations as the child
// wrote them, numbers beyond float64), and this way every protocol mechanism
// stays mcp-go's.
//
// The payload is carried as a JSON string, not as raw JSON: decoding the
// string gives back the exact bytes mcpmux put in (encoding/json would
// otherwise compact the raw JSON and escape <, > and & in it), marshalling a
// string never fails, and nothing inside the payload can be mistaken for
// the key, since its quotes are escaped.
//
// Where the edge that writes the answer keeps relaySlots (a stdio session,
// an HTTP request),
// an after-hook parks the payload in one of them before mcp-go encodes the
// placeholder, which then carries only the slot's number: the payload is
// neither escaped nor unescaped, and the edge splices it in as it is.

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// relayKey is the _meta key of a placeholder's payload. jsonwire reads it
// without allocating, as one of the keys it knows (TestRelayKeyKnown).
const relayKey = "io.mcpmux/relay"

// relayNeedle is the key as mcp-go writes it: no message without it is
// decoded by swapRelayed.
var relayNeedle = []byte(`"` + relayKey + `"`)

// relayDecoration is what mcp-go's decoration for protocol 2026-07-28
// (server/response.go, decorateResult) puts at the top of a result:
// resultType on every result, ttlMs and cacheScope on list and read results.
// It also puts serverInfo in _meta; every _meta entry of the placeholder but
// the payload is kept the same way.
var relayDecoration = [...]string{"resultType", "ttlMs", "cacheScope"}

// relayCompletionTotal marks a Completion that carries a payload (see
// relayCompletion): no provider reports a negative total.
const relayCompletionTotal = -1

// relayMeta is the _meta of a placeholder carrying raw, which must be one
// JSON object (the whole result).
func relayMeta(raw json.RawMessage) *mcp.Meta {
	return &mcp.Meta{AdditionalFields: map[string]any{relayKey: string(raw)}}
}

// relayInto makes res a placeholder carrying raw, for the after-hooks of
// the list methods (tools/list, prompts/list, resources/list,
// resources/templates/list) and anything else that has the result in hand;
// the caller empties res's typed fields, which the payload replaces.
func relayInto(res mcp.ResultMetadata, raw json.RawMessage) {
	if res != nil {
		res.SetResultMeta(relayMeta(raw))
	}
}

// relayToolResult is what a tools/call handler returns to answer with raw.
func relayToolResult(raw json.RawMessage) *mcp.CallToolResult {
	return &mcp.CallToolResult{Result: mcp.Result{Meta: relayMeta(raw)}, Content: []mcp.Content{}}
}

// relayPromptResult is what a prompts/get handler returns to answer with
// raw.
func relayPromptResult(raw json.RawMessage) *mcp.GetPromptResult {
	return &mcp.GetPromptResult{Result: mcp.Result{Meta: relayMeta(raw)}, Messages: []mcp.PromptMessage{}}
}

// relayResourceContents is what a resources/read handler returns to answer
// with raw. A handler returns contents, not a result, so the payload rides
// in one contents item, which the after-read hook that addRelayHooks adds
// moves into the result's _meta before mcp-go encodes the result.
func relayResourceContents(raw json.RawMessage) []mcp.ResourceContents {
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: relayKey, Meta: map[string]any{relayKey: string(raw)}}}
}

// relayCompletion is what a PromptCompletionProvider or
// ResourceCompletionProvider returns to answer completion/complete with
// raw. A provider returns the completion, not the result, so the payload
// rides in its values, which the after-complete hook that addRelayHooks adds
// moves into the result's _meta.
func relayCompletion(raw json.RawMessage) *mcp.Completion {
	return &mcp.Completion{Values: []string{relayKey, string(raw)}, Total: relayCompletionTotal}
}

// addRelayHooks adds the hooks that relayResourceContents and
// relayCompletion need. mcp-go runs after-hooks on the very result it then
// encodes (server/request_handler.go), so what they change is what is
// written.
//
// They also park every placeholder's payload in the slots of the edge that
// writes it, if it keeps any; they must be added after the hooks that make
// placeholders (the list hooks).
func addRelayHooks(h *server.Hooks) {
	h.AddAfterReadResource(func(ctx context.Context, _ any, _ *mcp.ReadResourceRequest, res *mcp.ReadResourceResult) {
		relayReadResult(res)
		park(ctx, res)
	})
	h.AddAfterComplete(func(ctx context.Context, _ any, _ *mcp.CompleteRequest, res *mcp.CompleteResult) {
		relayCompleteResult(res)
		park(ctx, res)
	})
	h.AddAfterCallTool(func(ctx context.Context, _ any, _ *mcp.CallToolRequest, res any) {
		// A task-augmented call answers with its task, whose result is
		// kept by mcp-go and may be asked for more than once: only a
		// result written now is parked.
		if r, ok := res.(*mcp.CallToolResult); ok {
			park(ctx, r)
		}
	})
	h.AddAfterGetPrompt(func(ctx context.Context, _ any, _ *mcp.GetPromptRequest, res *mcp.GetPromptResult) {
		park(ctx, res)
	})
	h.AddAfterListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest, res *mcp.ListToolsResult) {
		park(ctx, res)
	})
	h.AddAfterListPrompts(func(ctx context.Context, _ any, _ *mcp.ListPromptsRequest, res *mcp.ListPromptsResult) {
		park(ctx, res)
	})
	h.AddAfterListResources(func(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, res *mcp.ListResourcesResult) {
		park(ctx, res)
	})
	h.AddAfterListResourceTemplates(func(ctx context.Context, _ any, _ *mcp.ListResourceTemplatesRequest, res *mcp.ListResourceTemplatesResult) {
		park(ctx, res)
	})
}

// relaySlots holds the payloads of the placeholders one edge writes (a
// stdio session's answerWriter, an HTTP request's recorder) from the after-hook that parks them until
// the edge takes them. Only that edge's requests take mu.
type relaySlots struct {
	mu   sync.Mutex
	next uint64
	held map[uint64]string
}

type relaySlotsKey struct{}

// withRelaySlots returns ctx for the requests of an edge that takes its
// placeholders' payloads from s.
func withRelaySlots(ctx context.Context, s *relaySlots) context.Context {
	return context.WithValue(ctx, relaySlotsKey{}, s)
}

// park moves the payload of res, if it is a placeholder with one, into the
// slots of ctx's edge, if it keeps any, leaving the slot's number in its
// place.
func park(ctx context.Context, res mcp.ResultMetadata) {
	s, _ := ctx.Value(relaySlotsKey{}).(*relaySlots)
	if s == nil || res == nil {
		return
	}
	meta := res.GetResultMeta()
	if meta == nil {
		return
	}
	payload, ok := meta.AdditionalFields[relayKey].(string)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[uint64]string{}
	}
	s.next++
	s.held[s.next] = payload
	meta.AdditionalFields[relayKey] = s.next
}

// take removes and returns the payload parked under n.
func (s *relaySlots) take(n uint64) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.held[n]
	delete(s.held, n)
	return p, ok
}

// parked is how many payloads wait in s.
func (s *relaySlots) parked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// relayReadResult moves the payload of relayResourceContents from its
// contents item into res's _meta; any other result is left alone.
func relayReadResult(res *mcp.ReadResourceResult) {
	if res == nil || len(res.Contents) != 1 {
		return
	}
	c, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok || c.URI != relayKey {
		return
	}
	if raw, ok := c.Meta[relayKey].(string); ok {
		res.Meta = relayMeta(json.RawMessage(raw))
		res.Contents = []mcp.ResourceContents{}
	}
}

// relayCompleteResult moves the payload of relayCompletion from the
// completion's values into res's _meta; any other result is left alone.
func relayCompleteResult(res *mcp.CompleteResult) {
	if res == nil || res.Completion.Total != relayCompletionTotal || len(res.Completion.Values) != 2 ||
		res.Completion.Values[0] != relayKey {
		return
	}
	res.Meta = relayMeta(json.RawMessage(res.Completion.Values[1]))
	res.Completion = mcp.Completion{Values: []string{}}
}

// swapRelayed returns msg, one JSON-RPC message (surrounding whitespace
// allowed), with the result of a placeholder replaced by its payload, and
// whether it did. What mcp-go's 2026-07-28 decoration put on the placeholder
// (relayDecoration at the top, the other entries of _meta) is added to the
// payload where the payload has no such key; the payload's own keys win.
// Every byte outside the result (id, jsonrpc) stays as mcp-go wrote it. A
// message that is not a response with such a placeholder, or whose payload
// is not a JSON object, comes back unchanged. It never panics, and a message
// without the key costs one bytes.Contains.
func swapRelayed(msg []byte) ([]byte, bool) { return swapRelayedFrom(msg, nil) }

// swapRelayedFrom is swapRelayed for an edge that keeps slots: a
// placeholder that carries a slot's number gets the payload parked there
// (which leaves the slot), trusted to be one JSON object as relayMeta
// requires; the slot of a number not parked in slots is left alone, and the
// message comes back unchanged.
func swapRelayedFrom(msg []byte, slots *relaySlots) ([]byte, bool) {
	if out, ok := announcement(msg); ok {
		return out, true
	}
	if bytes.Contains(msg, errorNeedle) && jsonwire.Valid(msg) {
		if out, ok := swapError(msg); ok {
			return out, true
		}
	}
	if !bytes.Contains(msg, relayNeedle) || !jsonwire.Valid(msg) {
		return msg, false
	}
	top, ok := jsonwire.Members(msg)
	if !ok {
		return msg, false
	}
	if top.Only("jsonrpc") == nil || top.Only("id") == nil || top.Last("method") != nil || top.Last("error") != nil {
		return msg, false
	}
	result := top.Only("result")
	if result == nil {
		return msg, false
	}
	res := msg[result.Start:result.End]
	holder, ok := jsonwire.Members(res)
	if !ok {
		return msg, false
	}
	meta := holder.Only("_meta")
	if meta == nil {
		return msg, false
	}
	metaObj, ok := jsonwire.Members(res[meta.Start:meta.End])
	if !ok {
		return msg, false
	}
	carried := metaObj.Only(relayKey)
	if carried == nil {
		return msg, false
	}
	metaBytes := res[meta.Start:meta.End]
	carriedBytes := metaBytes[carried.Start:carried.End]
	if carriedBytes[0] != '"' {
		n, err := strconv.ParseUint(string(carriedBytes), 10, 64)
		if err != nil || slots == nil {
			return msg, false
		}
		payload, ok := slots.take(n)
		if !ok {
			return msg, false
		}
		if !hasDecoration(holder, metaObj) {
			out := make([]byte, 0, len(msg)-len(res)+len(payload))
			out = append(out, msg[:result.Start]...)
			out = append(out, payload...)
			return append(out, msg[result.End:]...), true
		}
		p := []byte(payload)
		pObj, ok := jsonwire.Members(p)
		if !ok {
			return msg, false
		}
		return spliceDecorated(msg, result, holder, metaObj, metaBytes, p, pObj), true
	}
	var payload string
	if json.Unmarshal(carriedBytes, &payload) != nil {
		return msg, false
	}
	p := []byte(payload)
	if !jsonwire.Valid(p) {
		return msg, false
	}
	pObj, ok := jsonwire.Members(p)
	if !ok {
		return msg, false
	}
	return spliceDecorated(msg, result, holder, metaObj, metaBytes, p, pObj), true
}

// hasDecoration reports whether a placeholder (holder, its _meta metaObj)
// carries anything besides the payload that the payload may lack.
func hasDecoration(holder, metaObj jsonwire.Object) bool {
	for _, k := range relayDecoration {
		if holder.Last(k) != nil {
			return true
		}
	}
	return len(metaObj.Members) > 1
}

// spliceDecorated returns msg with the placeholder result replaced by the
// payload p (read as pObj), with what the decoration added and p lacks.
func spliceDecorated(msg []byte, result *jsonwire.Member, holder, metaObj jsonwire.Object, metaBytes, p []byte, pObj jsonwire.Object) []byte {
	res := msg[result.Start:result.End]
	// What the decoration added that the payload lacks, as "key":value
	// spans of the placeholder: keys at the top, and entries of _meta,
	// which go into the payload's _meta (or make one; a _meta that is not
	// an object gets none).
	var addTop, addMeta [][]byte
	for _, k := range relayDecoration {
		if m := holder.Last(k); m != nil && pObj.Last(k) == nil {
			addTop = append(addTop, res[m.KeyStart:m.End])
		}
	}
	pMeta := pObj.Last("_meta")
	var pMetaObj jsonwire.Object
	metaOK := true
	if pMeta != nil {
		pMetaObj, metaOK = jsonwire.Members(p[pMeta.Start:pMeta.End])
	}
	for i := range metaObj.Members {
		if m := &metaObj.Members[i]; metaOK && m.Key != relayKey && pMetaObj.Last(m.Key) == nil {
			addMeta = append(addMeta, metaBytes[m.KeyStart:m.End])
		}
	}

	out := make([]byte, 0, len(msg)-len(res)+len(p)+64*(len(addTop)+len(addMeta)))
	out = append(out, msg[:result.Start]...)
	rest := p[:pObj.Close]
	if pMeta != nil && len(addMeta) > 0 {
		at := pMeta.Start + pMetaObj.Close
		out = append(out, p[:at]...)
		out = appendMembers(out, len(pMetaObj.Members) > 0, addMeta)
		rest = p[at:pObj.Close]
		addMeta = nil
	}
	out = append(out, rest...)
	out = appendMembers(out, len(pObj.Members) > 0, addTop)
	if len(addMeta) > 0 {
		if len(pObj.Members) > 0 || len(addTop) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"_meta":{`...)
		out = appendMembers(out, false, addMeta)
		out = append(out, '}')
	}
	out = append(out, p[pObj.Close:]...)
	return append(out, msg[result.End:]...)
}

// appendMembers appends the "key":value spans ms, after a comma when the
// object already has members.
func appendMembers(out []byte, comma bool, ms [][]byte) []byte {
	for _, m := range ms {
		if comma {
			out = append(out, ',')
		}
		out = append(out, m...)
		comma = true
	}
	return out
}

// sseData opens the data field of the one event mcp-go writes per Write
// ("event: message\ndata: <message>\n\n", after an "id:" line with an
// event store).
var sseData = []byte("\ndata: ")

// swapFramed is swapRelayed for one Write of mcp-go's streamable HTTP
// transport: a JSON body (json.Encoder: the message and a newline) or one
// server-sent event whose data is one line.
func swapFramed(b []byte) ([]byte, bool) { return swapFramedFrom(b, nil) }

// swapFramedFrom is swapFramed for an edge that keeps slots (see
// swapRelayedFrom).
func swapFramedFrom(b []byte, slots *relaySlots) ([]byte, bool) {
	if !bytes.Contains(b, relayNeedle) && !bytes.Contains(b, listChangedNeedle) && !bytes.Contains(b, taskStatusNeedle) &&
		!bytes.Contains(b, errorNeedle) {
		return b, false
	}
	if first := bytes.TrimLeft(b, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		return swapRelayedFrom(b, slots)
	}
	var start int
	if bytes.HasPrefix(b, sseData[1:]) {
		start = len(sseData) - 1
	} else if i := bytes.Index(b, sseData); i >= 0 {
		start = i + len(sseData)
	} else {
		return b, false
	}
	end := bytes.IndexByte(b[start:], '\n')
	if end < 0 {
		end = len(b)
	} else {
		end += start
	}
	swapped, ok := swapRelayedFrom(b[start:end], slots)
	if !ok {
		return b, false
	}
	if len(swapped) == 0 { // an announcement of mcp-go's: no event at all
		return nil, true
	}
	out := make([]byte, 0, start+len(swapped)+len(b)-end)
	out = append(out, b[:start]...)
	out = append(out, swapped...)
	return append(out, b[end:]...), true
}
