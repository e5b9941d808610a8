package mux

import (
	"strings"
	"testing"
)

// TestChildRequestsReachTheCaller: a child's sampling, elicitation and roots
// requests during a call reach the client that made it and the answer goes
// back to the child; a client without the capabilities gets the child a
// clear error naming the one missing, but for roots/list, which the child's
// [servers.X] roots answer (ht has file:///data, st none); from both
// children, over stdio.
func TestChildRequestsReachTheCaller(t *testing.T) {
	m := startTraffic(t)
	with := stdioUpstream(t, m, "alice", withAnswers("alice")...)
	for _, alias := range trafficChildren {
		for what, want := range map[string]string{"sampling": "sampled by alice", "elicitation": `"name":"alice"`, "roots": "file:///alice"} {
			if got := callChild(t, with, alias, "ask", map[string]any{"what": what}, nil); !strings.Contains(got, want) {
				t.Errorf("%s %s: %s, want %s", alias, what, got, want)
			}
		}
	}
	// A Mux serves one stdio client.
	without := stdioUpstream(t, startTraffic(t), "alice")
	for alias, roots := range map[string]string{"st": `{"roots":[]}`, "ht": `{"roots":[{"uri":"file:///data"}]}`} {
		for what, want := range map[string]string{"sampling": "did not declare the sampling capability",
			"elicitation": "did not declare the elicitation capability", "roots": roots} {
			if got := callChild(t, without, alias, "ask", map[string]any{"what": what}, nil); !strings.Contains(got, want) {
				t.Errorf("without capabilities, %s %s: %s, want %s", alias, what, got, want)
			}
		}
	}
}

// TestChildRequestsOverHTTP: over the HTTP upstream (clients with a
// standalone stream, where mcp-go sends sampling and roots), two identities
// ask through the HTTP child, which ties each request to its call, and each
// gets its own answer; a client without the capabilities gets the child an
// error naming the missing one, and for roots/list ht's configured roots.
func TestChildRequestsOverHTTP(t *testing.T) {
	m := startTraffic(t)
	connectHTTP := httpUpstream(t, m, true)
	for _, id := range []string{"alice", "bob"} {
		u := connectHTTP(id, withAnswers(id)...)
		for what, want := range map[string]string{"sampling": "sampled by " + id, "elicitation": `"name":"` + id + `"`, "roots": "file:///" + id} {
			if got := callChild(t, u, "ht", "ask", map[string]any{"what": what}, nil); !strings.Contains(got, want) {
				t.Errorf("%s %s: %s, want %s", id, what, got, want)
			}
		}
	}
	bare := connectHTTP("alice")
	for _, what := range []string{"sampling", "elicitation"} {
		if got := callChild(t, bare, "ht", "ask", map[string]any{"what": what}, nil); !strings.Contains(got, "did not declare the "+what+" capability") {
			t.Errorf("%s without the capability: %s", what, got)
		}
	}
	if got := callChild(t, bare, "ht", "ask", map[string]any{"what": "roots"}, nil); got != `{"roots":[{"uri":"file:///data"}]}` {
		t.Errorf("roots without the capability: %s, want ht's configured roots", got)
	}
}
