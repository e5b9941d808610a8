package mux

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/pipeline"
)

// TestRoundBoundPerServer: with st's max_in_flight at 2, alice holds at
// most one round of st that waits for her answers: her second call's
// sampling is refused at the child, naming the bound, and the call ends
// as one without rounds; a round at ht is not held back by it; once her
// first round is answered, a new one at st waits for her again.
func TestRoundBoundPerServer(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{st: "max_in_flight = 2"})
	alice := modernStdio(t, l.m, "alice")
	args := func(tag string) map[string]any { return map[string]any{"tag": tag, "rounds": "roots"} }
	first := handCall(t, alice, "st", "asks", args("a1"), "", nil)
	if first.ResultType != "input_required" {
		t.Fatalf("alice's first round: %+v", first)
	}
	second := handCall(t, alice, "st", "asks", args("a2"), "", nil)
	if second.ResultType == "input_required" || !strings.Contains(second.Text(), "roots error: ") ||
		!strings.Contains(second.Text(), "half the server's max_in_flight") {
		t.Fatalf("alice's second round: %+v", second)
	}
	if other := handCall(t, alice, "ht", "asks", args("h1"), "", nil); other.ResultType != "input_required" {
		t.Fatalf("alice's round at ht: %+v", other)
	}
	answers := map[string]any{}
	for k := range first.InputRequests {
		answers[k] = json.RawMessage(`{"roots":[]}`)
	}
	if done := handCall(t, alice, "st", "asks", args("a1"), first.RequestState, answers); done.ResultType == "input_required" || done.IsError {
		t.Fatalf("alice's first round answered: %+v", done)
	}
	testsupport.WaitFor(t, "the first round's place given back", func() bool { return l.m.p.RoundsAsking() == 1 })
	if again := handCall(t, alice, "st", "asks", args("a3"), "", nil); again.ResultType != "input_required" {
		t.Fatalf("alice's round after the first ended: %+v", again)
	}
}

// TestRoundAsksBound: a child that makes 17 requests at once gets 16 of
// them handed to the client and the 17th refused, naming the bound.
func TestRoundAsksBound(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := modernStdio(t, l.m, "alice")
	args := map[string]any{"tag": "flood", "rounds": strings.Repeat("roots+", pipeline.MaxRoundAsks) + "roots"}
	first := handCall(t, u, "st", "asks", args, "", nil)
	if first.ResultType != "input_required" {
		t.Fatalf("first answer %+v", first)
	}
	// No retry until the child's 17th request is refused, the 16 others
	// held.
	testsupport.WaitFor(t, "the 17th request refused", func() bool {
		pending, asked, _ := l.m.p.RoundAsks(first.RequestState)
		return pending+asked == pipeline.MaxRoundAsks && strings.Contains(l.log.String(), "the most it may")
	})
	answered := len(first.InputRequests)
	for res := first; res.ResultType == "input_required"; {
		answers := map[string]any{}
		for k := range res.InputRequests {
			answers[k] = json.RawMessage(`{"roots":[]}`)
		}
		res = handCall(t, u, "st", "asks", args, res.RequestState, answers)
		if res.ResultType == "input_required" {
			answered += len(res.InputRequests)
			continue
		}
		if answered != pipeline.MaxRoundAsks || strings.Count(res.Text(), "the most it may") != 1 {
			t.Fatalf("%d handed out, final %+v", answered, res)
		}
	}
}

// TestRoundUnknownStateAudited: a retry whose requestState names no round
// writes the audit line of a call of an unknown name.
func TestRoundUnknownStateAudited(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := modernStdio(t, l.m, "alice")
	if got := handCall(t, u, "st", "asks", map[string]any{"tag": "x", "rounds": "roots"}, "no-such-state", map[string]any{}); !got.IsError || got.Text() != pipeline.UnknownState(mcp.MethodToolsCall) {
		t.Fatalf("retry of no round: %+v", got)
	}
	testsupport.WaitFor(t, "the refused retry's audit line", func() bool {
		return strings.Contains(l.log.String(), `"identity":"alice","tool":"st__asks","server":"","decision":"unknown","outcome":"refused"`)
	})
}
