package mux

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/policy"
)

// readersOfAll is the traffic lab's policies with resources readable too.
var readersOfAll = map[string]string{"alice": "allow = [\"*\"]\nallow_resources = [\"*\"]", "bob": "allow = [\"*\"]\nallow_resources = [\"*\"]"}

// asksURI is the exposed URI of alias's asks resource for tag and rounds.
func asksURI(alias, tag, rounds string) string {
	return naming.ExposeURI(alias, "traffic://asks/"+tag+"?rounds="+url.QueryEscape(rounds))
}

// allCaps is the _meta of a hand-made request of a client that declared
// sampling, elicitation and roots.
func allCaps() map[string]any {
	return testsupport.ModernMeta(map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}})
}

// handKind sends method (prompts/get, resources/read or tools/call) by
// hand as a 2026-07-28 request with params and allCaps; state and
// responses make it a retry. It returns the result, or the JSON-RPC error.
func handKind(t *testing.T, u *upstreamClient, method mcp.MCPMethod, params map[string]any, state string, responses map[string]any) (testsupport.InputRequired, *testsupport.RPCError) {
	t.Helper()
	params["_meta"] = allCaps()
	delete(params, "requestState")
	delete(params, "inputResponses")
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = responses
	}
	raw, rerr := testsupport.ModernTry(t, u.Client, string(method), params)
	if rerr != nil {
		return testsupport.InputRequired{}, rerr
	}
	return testsupport.ReadInputRequired(t, raw), nil
}

func promptParams(alias, tag, rounds string) map[string]any {
	return map[string]any{"name": alias + config.DefaultSeparator + "asks", "arguments": map[string]any{"tag": tag, "rounds": rounds}}
}

// TestRoundsOfPromptsAndReadsThroughMcpGoClient: an mcp-go 2026-07-28
// client, over stdio and HTTP, gets a prompt and reads a resource whose
// child asks for sampling, then elicitation and roots at once; it answers
// the input-required results with its handlers, and the prompt and the
// read return the child's final text with the client's answers. The
// prompt's progress of both rounds reaches the client under its token.
func TestRoundsOfPromptsAndReadsThroughMcpGoClient(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{policies: readersOfAll})
	ups := map[string]*upstreamClient{
		"stdio": modernStdio(t, l.m, "alice", withAnswers("alice")...),
		"http":  modernHTTP(t, l.m, "alice", withAnswers("alice")...),
	}
	wants := func(t *testing.T, tag, got string) {
		t.Helper()
		for _, want := range []string{tag + ": sampling {", "sampled by alice", `elicitation {"action":"accept","content":{"name":"alice"}}`, `roots {"roots":[{"uri":"file:///alice"}]}`} {
			if !strings.Contains(got, want) {
				t.Errorf("%s, want %s in it", got, want)
			}
		}
	}
	for name, u := range ups {
		for _, alias := range trafficChildren {
			t.Run(name+"/"+alias, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
				defer cancel()
				tag := name + "-" + alias
				get := mcp.GetPromptRequest{}
				get.Params.Name = alias + config.DefaultSeparator + "asks"
				get.Params.Arguments = map[string]string{"tag": tag + "-p", "rounds": "sampling/elicitation+roots"}
				get.Params.Meta = &mcp.Meta{ProgressToken: tag + "-p"}
				prompt, err := u.GetPrompt(ctx, get)
				if err != nil {
					t.Fatal(err)
				}
				if len(prompt.Messages) != 1 {
					t.Fatalf("prompt %+v", prompt)
				}
				text, _ := prompt.Messages[0].Content.(mcp.TextContent)
				wants(t, tag+"-p", text.Text)
				if alias == "st" { // an mcp-go HTTP child sends progress on its standalone stream
					if p := progressOf(u, tag+"-p"); !slices.Equal(p, []string{tag + "-p round 1", tag + "-p round 2"}) {
						t.Errorf("progress %q, want both rounds'", p)
					}
				}

				read := mcp.ReadResourceRequest{}
				read.Params.URI = asksURI(alias, tag+"-r", "sampling/elicitation+roots")
				res, err := u.ReadResource(ctx, read)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Contents) != 1 {
					t.Fatalf("read %+v", res)
				}
				c, _ := res.Contents[0].(mcp.TextResourceContents)
				if c.URI != read.Params.URI {
					t.Errorf("contents URI %q, want the exposed %q", c.URI, read.Params.URI)
				}
				wants(t, tag+"-r", c.Text)
			})
		}
	}
}

// TestRoundRetriesOfPromptsAndReadsByHand: a retry resumes only a round of
// the same identity, kind of request and exposed name. A prompts/get
// round's requestState is refused, the round left alone, for another
// identity, another prompt, a resources/read and a tools/call; then the
// right retry gets the prompt with the client's answer, and the used
// requestState is refused. A resources/read round's is refused for another
// URI and a prompts/get, then resumed by the right retry.
func TestRoundRetriesOfPromptsAndReadsByHand(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{policies: readersOfAll})
	alice := modernStdio(t, l.m, "alice")
	bob := modernHTTP(t, l.m, "bob")
	unknown := func(what string, method mcp.MCPMethod, res testsupport.InputRequired, rerr *testsupport.RPCError) {
		t.Helper()
		want := pipeline.UnknownState(method)
		if method == mcp.MethodToolsCall {
			if rerr != nil || !res.IsError || res.Text() != want {
				t.Errorf("%s: %+v %v, want a tool error %q", what, res, rerr, want)
			}
			return
		}
		if rerr == nil || rerr.Code != mcp.INVALID_PARAMS || rerr.Message != want {
			t.Errorf("%s: %+v %v, want -32602 %q", what, res, rerr, want)
		}
	}
	first := func(method mcp.MCPMethod, params map[string]any) testsupport.InputRequired {
		t.Helper()
		r, rerr := handKind(t, alice, method, params, "", nil)
		if rerr != nil || r.ResultType != "input_required" || len(r.InputRequests) != 1 || len(r.RequestState) < 22 {
			t.Fatalf("%s: %+v %v, want one input request and a requestState", method, r, rerr)
		}
		return r
	}
	onlyKey := func(r testsupport.InputRequired, method mcp.MCPMethod) string {
		t.Helper()
		for k, ir := range r.InputRequests {
			if ir.Method != string(method) {
				t.Fatalf("input request %s: %s, want %s", k, ir.Method, method)
			}
			return k
		}
		return ""
	}

	p := first(mcp.MethodPromptsGet, promptParams("st", "hp", "roots"))
	rootsKey := onlyKey(p, mcp.MethodListRoots)
	res, rerr := handKind(t, bob, mcp.MethodPromptsGet, promptParams("st", "hp", "roots"), p.RequestState, nil)
	unknown("bob's retry", mcp.MethodPromptsGet, res, rerr)
	res, rerr = handKind(t, alice, mcp.MethodPromptsGet, promptParams("ht", "hp", "roots"), p.RequestState, nil)
	unknown("a retry naming another prompt", mcp.MethodPromptsGet, res, rerr)
	res, rerr = handKind(t, alice, mcp.MethodResourcesRead, map[string]any{"uri": asksURI("st", "hp", "roots")}, p.RequestState, nil)
	unknown("a resources/read with a prompt's requestState", mcp.MethodResourcesRead, res, rerr)
	res, rerr = handKind(t, alice, mcp.MethodToolsCall, map[string]any{"name": "st__asks", "arguments": map[string]any{"tag": "hp", "rounds": "roots"}}, p.RequestState, nil)
	unknown("a tools/call with a prompt's requestState", mcp.MethodToolsCall, res, rerr)
	if !roundWaits(l.m, p.RequestState) {
		t.Fatal("a refused retry ended the round")
	}
	answer := map[string]any{rootsKey: json.RawMessage(`{"roots":[{"uri":"file:///hand","name":"n"}]}`)}
	final, rerr := handKind(t, alice, mcp.MethodPromptsGet, promptParams("st", "hp", "roots"), p.RequestState, answer)
	if rerr != nil || final.ResultType == "input_required" || final.Text() != `hp: roots {"roots":[{"uri":"file:///hand","name":"n"}]}` {
		t.Errorf("the prompt after its retry: %+v %v", final, rerr)
	}
	if !slices.Contains(l.recordOf("st"), `reply {"roots":[{"uri":"file:///hand","name":"n"}]}`) {
		t.Errorf("the child did not get the answer as sent: %q", l.recordOf("st"))
	}
	res, rerr = handKind(t, alice, mcp.MethodPromptsGet, promptParams("st", "hp", "roots"), p.RequestState, answer)
	unknown("a used requestState", mcp.MethodPromptsGet, res, rerr)

	uri := asksURI("ht", "hr", "sampling")
	r := first(mcp.MethodResourcesRead, map[string]any{"uri": uri})
	samplingKey := onlyKey(r, mcp.MethodSamplingCreateMessage)
	res, rerr = handKind(t, alice, mcp.MethodResourcesRead, map[string]any{"uri": asksURI("ht", "other", "sampling")}, r.RequestState, nil)
	unknown("a read of another URI", mcp.MethodResourcesRead, res, rerr)
	res, rerr = handKind(t, alice, mcp.MethodPromptsGet, promptParams("ht", "hr", "sampling"), r.RequestState, nil)
	unknown("a prompts/get with a read's requestState", mcp.MethodPromptsGet, res, rerr)
	final, rerr = handKind(t, alice, mcp.MethodResourcesRead, map[string]any{"uri": uri}, r.RequestState,
		map[string]any{samplingKey: json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"by hand"},"model":"m"}`)})
	if rerr != nil || final.ResultType == "input_required" || !strings.Contains(final.Text(), `hr: sampling {`) || !strings.Contains(final.Text(), `"text":"by hand"`) {
		t.Errorf("the read after its retry: %+v %v", final, rerr)
	}
	testsupport.WaitFor(t, "the rounds to be gone", func() bool {
		return !roundWaits(l.m, p.RequestState) && !roundWaits(l.m, r.RequestState)
	})
}

// TestRoundOfPromptAndReadAfterPolicyEdit: a policy edit between rounds
// takes effect for prompts and resources too: the retry of a prompt, and
// of a read of a server's resource, the caller may no longer have is
// refused as unknown; both rounds end, their child requests cancelled at
// the child, and each request has one audit line.
func TestRoundOfPromptAndReadAfterPolicyEdit(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{policies: readersOfAll})
	u := modernStdio(t, l.m, "alice")
	uri := asksURI("st", "edit", "roots")
	p, rerr := handKind(t, u, mcp.MethodPromptsGet, promptParams("st", "edit", "roots"), "", nil)
	if rerr != nil || p.ResultType != "input_required" {
		t.Fatalf("prompt: %+v %v", p, rerr)
	}
	r, rerr := handKind(t, u, mcp.MethodResourcesRead, map[string]any{"uri": uri}, "", nil)
	if rerr != nil || r.ResultType != "input_required" {
		t.Fatalf("read: %+v %v", r, rerr)
	}
	editPolicy(t, l.m, "alice", "allow = [\"ht__*\"]\nallow_resources = [\"ht\"]\n", policy.Item{Kind: policy.Resource, Server: "st"})
	if res, rerr := handKind(t, u, mcp.MethodPromptsGet, promptParams("st", "edit", "roots"), p.RequestState, map[string]any{}); rerr == nil || !strings.Contains(rerr.Message, "not found") {
		t.Errorf("a retry of a prompt no longer allowed: %+v %v", res, rerr)
	}
	if res, rerr := handKind(t, u, mcp.MethodResourcesRead, map[string]any{"uri": uri}, r.RequestState, map[string]any{}); rerr == nil || rerr.Message != "Resource not found" {
		t.Errorf("a retry of a read no longer allowed: %+v %v", res, rerr)
	}
	testsupport.WaitFor(t, "both requests cancelled at the child", func() bool {
		n := 0
		for _, line := range l.recordOf("st") {
			if strings.HasPrefix(line, "cancelled ") {
				n++
			}
		}
		return n == 2
	})
	testsupport.WaitFor(t, "the rounds to be gone", func() bool {
		return !roundWaits(l.m, p.RequestState) && !roundWaits(l.m, r.RequestState)
	})
	testsupport.WaitFor(t, "the audit lines", func() bool {
		log := l.log.String()
		return strings.Count(log, `"prompt":"st__asks"`) == 1 && strings.Count(log, `"resource":"`+uri+`"`) == 1
	})
	for _, line := range strings.Split(l.log.String(), "\n") {
		if strings.Contains(line, `"prompt":"st__asks"`) || strings.Contains(line, `"resource":"`+uri+`"`) {
			if !strings.Contains(line, `"decision":"allowed"`) || !strings.Contains(line, `"outcome":"tool_error"`) {
				t.Errorf("audit line %s, want the round's own, allowed and ended in error", line)
			}
		}
	}
}
