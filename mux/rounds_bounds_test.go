package mux

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/child"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/upstream"
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
	testsupport.WaitFor(t, "the first round's place given back", func() bool { return l.m.rounds.waiting.Load() == 1 })
	if again := handCall(t, alice, "st", "asks", args("a3"), "", nil); again.ResultType != "input_required" {
		t.Fatalf("alice's round after the first ended: %+v", again)
	}
}

// TestRoundAsksBound: a child that makes 17 requests at once gets 16 of
// them handed to the client and the 17th refused, naming the bound.
func TestRoundAsksBound(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := modernStdio(t, l.m, "alice")
	args := map[string]any{"tag": "flood", "rounds": strings.Repeat("roots+", maxRoundAsks) + "roots"}
	first := handCall(t, u, "st", "asks", args, "", nil)
	if first.ResultType != "input_required" {
		t.Fatalf("first answer %+v", first)
	}
	// No retry until the child's 17th request is refused, the 16 others
	// held.
	r := roundOf(l.m, first.RequestState)
	testsupport.WaitFor(t, "the 17th request refused", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.pending)+len(r.asked) == maxRoundAsks && strings.Contains(l.log.String(), "the most it may")
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
		if answered != maxRoundAsks || strings.Count(res.Text(), "the most it may") != 1 {
			t.Fatalf("%d handed out, final %+v", answered, res)
		}
	}
}

// TestRoundUnknownStateAudited: a retry whose requestState names no round
// writes the audit line of a call of an unknown name.
func TestRoundUnknownStateAudited(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := modernStdio(t, l.m, "alice")
	if got := handCall(t, u, "st", "asks", map[string]any{"tag": "x", "rounds": "roots"}, "no-such-state", map[string]any{}); !got.IsError || got.Text() != unknownState(mcp.MethodToolsCall) {
		t.Fatalf("retry of no round: %+v", got)
	}
	testsupport.WaitFor(t, "the refused retry's audit line", func() bool {
		return strings.Contains(l.log.String(), `"identity":"alice","tool":"st__asks","server":"","decision":"unknown","outcome":"refused"`)
	})
}

// TestRoundHandOutEnded: a round whose context has ended hands out no
// requestState, and leaves none in the table.
func TestRoundHandOutEnded(t *testing.T) {
	rt := &roundTable{}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errRequestGone)
	r := &round{rt: rt, ctx: ctx, pending: []*childAsk{{method: string(mcp.MethodListRoots), reply: make(chan askReply, 1)}}}
	if raw, ok := r.handOut(); ok {
		t.Fatalf("an ended round handed out %s", raw)
	}
	rt.byToken.Range(func(k, _ any) bool { t.Errorf("state %v left in the table", k); return true })
}

// TestRoundsRefusedOnceClosing: once wait (Mux.Close) has begun, no round
// starts, and wait still waits for the one running.
func TestRoundsRefusedOnceClosing(t *testing.T) {
	rt := &roundTable{idle: make(chan struct{}, 1)}
	if !rt.enter() {
		t.Fatal("a round refused before closing")
	}
	waited := make(chan struct{})
	go func() { rt.wait(); close(waited) }()
	testsupport.WaitFor(t, "wait to begin", func() bool { return rt.running.Load()&roundsClosed != 0 })
	if rt.enter() {
		t.Fatal("a round started once closing")
	}
	select {
	case <-waited:
		t.Fatal("wait returned with a round running")
	default:
	}
	rt.finished()
	<-waited
}

// TestRoundHoldGivenBack: places reserved by hold are given back, the
// identity's counter dropped once it is zero.
func TestRoundHoldGivenBack(t *testing.T) {
	rt := &roundTable{}
	c := child.New(nil, child.Env{Config: &config.Config{}}, config.Server{Alias: "x", MaxInFlight: 4})
	var keys []string
	for range 2 {
		k, refused := rt.hold("alice", c)
		if refused != "" {
			t.Fatal(refused)
		}
		keys = append(keys, k)
	}
	if _, refused := rt.hold("alice", c); refused == "" {
		t.Fatal("a third round of alice at a server of max_in_flight 4")
	}
	for _, k := range keys {
		rt.unhold(k)
	}
	if n := rt.waiting.Load(); n != 0 {
		t.Errorf("%d places still counted", n)
	}
	rt.held.Range(func(k, _ any) bool { t.Errorf("counter %q left", k); return true })
}

// TestRoundAnswerNotRetried: a round whose work has its answer between
// rounds ends once nobody retries within its hold (shortened here), not at
// call_timeout, and its requestState is gone.
func TestRoundAnswerNotRetried(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{mux: `call_timeout = "1h"`})
	l.m.rounds.holdFor = time.Millisecond
	done := make(chan struct{})
	r := l.m.startRound(upstream.WithIdentity(context.Background(), "alice"), &upstream.Request{Method: string(mcp.MethodToolsCall)}, mcp.MethodToolsCall, "st__asks",
		func(context.Context, *child.Call) answer { <-done; return answer{} })
	r.mu.Lock()
	r.pending = append(r.pending, &childAsk{method: string(mcp.MethodListRoots), reply: make(chan askReply, 1)})
	r.mu.Unlock()
	if _, ok := r.handOut(); !ok {
		t.Fatal("nothing handed out")
	}
	state := ""
	l.m.rounds.byToken.Range(func(k, _ any) bool { state = k.(string); return false })
	close(done)
	testsupport.WaitFor(t, "the unclaimed answer's round to end", func() bool {
		return roundOf(l.m, state) == nil && errors.Is(context.Cause(r.ctx), errNotRetried)
	})
}
