package mux

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/mux/edge"
	"github.com/mcpmux/mcpmux/mux/pipeline"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/policy"
)

// connectModern starts a 2026-07-28 mcp-go client on tr.
func connectModern(t *testing.T, tr transport.Interface, opts []client.ClientOption) *upstreamClient {
	t.Helper()
	u := &upstreamClient{Client: client.NewClient(tr, append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20260728))...)}
	if err := u.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	u.notes = testsupport.RecordNotes(u.Client)
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20260728
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := u.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	if v := u.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
		t.Fatalf("negotiated %s", v)
	}
	return u
}

// modernStdio connects a 2026-07-28 client to m's stdio upstream as
// identity.
func modernStdio(t *testing.T, m *Mux, identity string, opts ...client.ClientOption) *upstreamClient {
	t.Helper()
	return stdioClient(t, m, identity, opts, connectModern)
}

// modernHTTP connects a 2026-07-28 client to m's HTTP upstream as identity.
func modernHTTP(t *testing.T, m *Mux, identity string, opts ...client.ClientOption) *upstreamClient {
	t.Helper()
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(r *http.Request) string { return r.Header.Get("X-Identity") })
	tr, err := transport.NewStreamableHTTP(url, transport.WithHTTPHeaders(map[string]string{"X-Identity": identity}))
	if err != nil {
		t.Fatal(err)
	}
	u := connectModern(t, tr, opts)
	t.Cleanup(func() { _ = u.Close() })
	return u
}

// handCall sends tools/call of alias's tool as a 2026-07-28 request of a
// client that declared sampling, elicitation and roots, by hand; state and
// responses make it a retry.
func handCall(t *testing.T, u *upstreamClient, alias, tool string, args map[string]any, state string, responses map[string]any) testsupport.InputRequired {
	t.Helper()
	params := map[string]any{"name": alias + config.DefaultSeparator + tool, "arguments": args,
		"_meta": testsupport.ModernMeta(map[string]any{"sampling": map[string]any{}, "elicitation": map[string]any{}, "roots": map[string]any{}})}
	if state != "" {
		params["requestState"] = state
		params["inputResponses"] = responses
	}
	return testsupport.ReadInputRequired(t, testsupport.ModernRPC(t, u.Client, string(mcp.MethodToolsCall), params))
}

// roundWaits reports whether a round waits for a retry under state.
func roundWaits(m *Mux, state string) bool {
	_, _, ok := m.p.RoundAsks(state)
	return ok
}

// TestRoundsThroughMcpGoClient is the proof for 2026-07-28 clients:
// an mcp-go client, over stdio and over HTTP, answers the input-required
// results of a call whose child asks for sampling, then for elicitation
// and roots at once, with its registered handlers, and the call returns the
// child's final result with the client's answers; the progress of both
// rounds reaches the client under its token, each round's through the
// request then waiting.
func TestRoundsThroughMcpGoClient(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	ups := map[string]*upstreamClient{
		"stdio": modernStdio(t, l.m, "alice", withAnswers("alice")...),
		"http":  modernHTTP(t, l.m, "alice", withAnswers("alice")...),
	}
	for name, u := range ups {
		for _, alias := range trafficChildren {
			t.Run(name+"/"+alias, func(t *testing.T) {
				tag := name + "-" + alias
				got := callChild(t, u, alias, "asks", map[string]any{"tag": tag, "rounds": "sampling/elicitation+roots"},
					&mcp.Meta{ProgressToken: tag})
				for _, want := range []string{tag + ": sampling {", "sampled by alice", `elicitation {"action":"accept","content":{"name":"alice"}}`, `roots {"roots":[{"uri":"file:///alice"}]}`} {
					if !strings.Contains(got, want) {
						t.Errorf("%s, want %s in it", got, want)
					}
				}
				if alias != "st" {
					return // an mcp-go HTTP child sends progress on its standalone stream
				}
				if p := progressOf(u, tag); !slices.Equal(p, []string{tag + " round 1", tag + " round 2"}) {
					t.Errorf("progress %q, want both rounds'", p)
				}
			})
		}
	}
}

// TestRoundsByHand drives the rounds by hand over stdio: the shape of an
// input-required result; two child requests made between rounds handed
// out together in the second; the client's answers reaching the child
// byte for byte (an unknown member and a number beyond float64 included);
// a used requestState refused; a retry of another identity refused without
// harm to the round; a retry missing a response failing that request at
// the child.
func TestRoundsByHand(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	alice := modernStdio(t, l.m, "alice")
	bob := modernHTTP(t, l.m, "bob")
	args := map[string]any{"tag": "hand", "rounds": "roots/sampling+elicitation", "gate": "hand-gate"}

	first := handCall(t, alice, "ht", "asks", args, "", nil)
	if first.ResultType != "input_required" || len(first.InputRequests) != 1 || len(first.RequestState) < 22 {
		t.Fatalf("first answer %+v, want one input request and a requestState", first)
	}
	var rootsKey string
	for k, r := range first.InputRequests {
		rootsKey = k
		if r.Method != string(mcp.MethodListRoots) {
			t.Fatalf("input request %s: %s", k, r.Method)
		}
	}
	// The child's next two requests arrive while no request of the
	// client's waits: both wait in the round for the retry.
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	if err := l.ht.Meet(ctx, "hand-gate", 2); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, "two child requests pending", func() bool {
		pending, _, _ := l.m.p.RoundAsks(first.RequestState)
		return pending == 2
	})

	if other := handCall(t, bob, "ht", "asks", args, first.RequestState, nil); !other.IsError || other.Text() != pipeline.UnknownState(mcp.MethodToolsCall) {
		t.Fatalf("bob's retry of alice's round: %+v", other)
	}
	second := handCall(t, alice, "ht", "asks", args, first.RequestState,
		map[string]any{rootsKey: json.RawMessage(`{"roots":[{"uri":"file:///hand"}]}`)})
	if second.ResultType != "input_required" || len(second.InputRequests) != 2 || second.RequestState == first.RequestState {
		t.Fatalf("second answer %+v, want both pending requests under a new state", second)
	}
	if again := handCall(t, alice, "ht", "asks", args, first.RequestState, nil); !again.IsError || again.Text() != pipeline.UnknownState(mcp.MethodToolsCall) {
		t.Fatalf("a used requestState: %+v", again)
	}
	answers := map[string]any{}
	for k, r := range second.InputRequests {
		switch mcp.MCPMethod(r.Method) {
		case mcp.MethodSamplingCreateMessage:
			if !strings.Contains(string(r.Params), `"maxTokens":10`) {
				t.Errorf("sampling params %s", r.Params)
			}
			answers[k] = json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"by hand"},"model":"m","extra":{"n":12345678901234567890}}`)
		case mcp.MethodElicitationCreate:
			if !strings.Contains(string(r.Params), `"message":"name?"`) {
				t.Errorf("elicitation params %s", r.Params)
			}
			// No answer: the child's request fails.
		default:
			t.Errorf("input request %s: %s", k, r.Method)
		}
	}
	final := handCall(t, alice, "ht", "asks", args, second.RequestState, answers)
	text := final.Text()
	for _, want := range []string{"hand: roots ", "file:///hand", `"text":"by hand"`, "elicitation error: ", "no response to elicitation/create"} {
		if final.ResultType == "input_required" || !strings.Contains(text, want) {
			t.Errorf("final %+v, want %s in it", final, want)
		}
	}
	verbatim := `reply {"role":"assistant","content":{"type":"text","text":"by hand"},"model":"m","extra":{"n":12345678901234567890}}`
	if !slices.Contains(l.recordOf("ht"), verbatim) {
		t.Errorf("the child did not get the answer as sent: %q", l.recordOf("ht"))
	}
	testsupport.WaitFor(t, "the round to be gone", func() bool { return !roundWaits(l.m, second.RequestState) })
}

// TestRoundNobodyRetries: a round whose client never retries ends at
// call_timeout: the child's call is cancelled at the child, its pending
// request answered with an error, the requestState refused afterwards, and
// nothing of the round is left running (the lab's goroutine check).
func TestRoundNobodyRetries(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{mux: `call_timeout = "1s"`})
	u := modernStdio(t, l.m, "alice")
	first := handCall(t, u, "st", "asks", map[string]any{"tag": "late", "rounds": "sampling"}, "", nil)
	if first.ResultType != "input_required" {
		t.Fatalf("first answer %+v", first)
	}
	l.waitRecord(t, "st", "cancelled ")
	testsupport.WaitFor(t, "the round to be gone", func() bool { return !roundWaits(l.m, first.RequestState) })
	if late := handCall(t, u, "st", "asks", map[string]any{"tag": "late", "rounds": "sampling"}, first.RequestState, map[string]any{}); !late.IsError || late.Text() != pipeline.UnknownState(mcp.MethodToolsCall) {
		t.Errorf("a retry after call_timeout: %+v", late)
	}
	testsupport.WaitFor(t, "the call's audit line", func() bool {
		return strings.Contains(l.log.String(), `"tool":"st__asks"`) && strings.Contains(l.log.String(), `"outcome":"timeout"`)
	})
}

// TestRoundRetryAfterPolicyEdit: a policy edit between rounds takes
// effect: the retry of a tool no longer allowed is refused as unknown, and
// the round ends, its call cancelled at the child.
func TestRoundRetryAfterPolicyEdit(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := modernStdio(t, l.m, "alice")
	first := handCall(t, u, "st", "asks", map[string]any{"tag": "edit", "rounds": "roots"}, "", nil)
	if first.ResultType != "input_required" {
		t.Fatalf("first answer %+v", first)
	}
	editPolicy(t, l.m, "alice", "allow = [\"ht__*\"]\n", policy.Item{Kind: policy.Tool, Server: "st", Name: "st__asks"})
	params := map[string]any{"name": "st__asks", "requestState": first.RequestState, "inputResponses": map[string]any{},
		"_meta": testsupport.ModernMeta(map[string]any{"roots": map[string]any{}})}
	res, rerr := testsupport.RPC(t, u.Client, string(mcp.MethodToolsCall), params)
	if rerr == nil && !strings.Contains(string(res), pipeline.ErrUnknownTool.Error()) {
		t.Fatalf("a retry of a tool no longer allowed: %s", res)
	}
	l.waitRecord(t, "st", "cancelled ")
	testsupport.WaitFor(t, "the round to be gone", func() bool { return !roundWaits(l.m, first.RequestState) })
}

// TestRoundWithoutCapability: a 2026-07-28 client that declared none of
// sampling, elicitation and roots gets no round: the child's request is
// refused with METHOD_NOT_FOUND naming the capability, as today; one that
// declared only roots gets a round for roots and the same refusal for
// sampling.
func TestRoundWithoutCapability(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := modernStdio(t, l.m, "alice")
	call := func(caps map[string]any, what string) testsupport.InputRequired {
		return testsupport.ReadInputRequired(t, testsupport.ModernRPC(t, u.Client, string(mcp.MethodToolsCall), map[string]any{
			"name": "st__ask", "arguments": map[string]any{"what": what}, "_meta": testsupport.ModernMeta(caps)}))
	}
	if got := call(map[string]any{}, "sampling"); got.ResultType == "input_required" || !strings.Contains(got.Text(), "did not declare the sampling capability") {
		t.Errorf("no capabilities: %+v", got)
	}
	if got := call(map[string]any{"roots": map[string]any{}}, "sampling"); got.ResultType == "input_required" || !strings.Contains(got.Text(), "did not declare the sampling capability") {
		t.Errorf("roots only, asked for sampling: %+v", got)
	}
	if got := call(map[string]any{"roots": map[string]any{}}, "roots"); got.ResultType != "input_required" {
		t.Errorf("roots only, asked for roots: %+v", got)
	}
}

// editPolicy writes identity's policy file as body, with m's policy watcher
// running until t ends, and returns once item is no longer allowed.
func editPolicy(t *testing.T, m *Mux, identity, body string, item policy.Item) {
	t.Helper()
	watchPolicies(t, m)
	testsupport.WaitFor(t, "the policy edit", func() bool {
		_ = os.WriteFile(filepath.Join(m.cfg.Mux.PolicyDir, identity+".toml"), []byte(body), 0o644)
		return !m.policies.Current().For(identity).Allows(item)
	})
}
