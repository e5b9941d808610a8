package mux

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
)

// TestRequestsOutsideCalls: the requests a child makes outside any call
// (here on a notifications/roots/list_changed, which is no call) go, with a
// stdio upstream, to its one client; over HTTP, roots/list is answered
// from [servers.X] roots where they are set (ht has file:///data) and
// refused where not (st: an empty list would be kept as the client's), and
// sampling and elicitation are refused saying why; a stdio client without
// a capability gets the child an error naming it, but for roots/list,
// which is answered from [servers.X] roots, empty or not: that client has
// none.
func TestRequestsOutsideCalls(t *testing.T) {
	cases := []struct {
		name string
		http bool
		opts []client.ClientOption
		want map[string]map[string]string // alias -> what -> part of the answer
	}{
		{"stdio", false, withAnswers("alice"), map[string]map[string]string{
			"st": {"sampling": "sampled by alice", "elicitation": `"name":"alice"`, "roots": `"uri":"file:///alice"`},
			"ht": {"sampling": "sampled by alice", "elicitation": `"name":"alice"`, "roots": `"uri":"file:///alice"`},
		}},
		{"stdio without capabilities", false, nil, map[string]map[string]string{
			"st": {"sampling": "did not declare the sampling capability", "elicitation": "did not declare the elicitation capability",
				"roots": `{"roots":[]}`},
			"ht": {"sampling": "did not declare the sampling capability", "elicitation": "did not declare the elicitation capability",
				"roots": `{"roots":[{"uri":"file:///data"}]}`},
		}},
		{"http", true, withAnswers("alice"), map[string]map[string]string{
			"st": {"sampling": "sampling/createMessage outside any call: over HTTP mcpmux cannot tell which client to ask",
				"elicitation": "elicitation/create outside any call: over HTTP mcpmux cannot tell which client to ask",
				"roots":       "roots/list outside any call: no client can be asked now, and [servers.st] roots is not set"},
			"ht": {"sampling": "sampling/createMessage outside any call: over HTTP mcpmux cannot tell which client to ask",
				"elicitation": "elicitation/create outside any call: over HTTP mcpmux cannot tell which client to ask",
				"roots":       `{"roots":[{"uri":"file:///data"}]}`},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := startTrafficLab(t, trafficOptions{})
			var u *upstreamClient
			if tc.http {
				u = httpUpstream(t, l.m, true)("alice", tc.opts...)
			} else {
				u = stdioUpstream(t, l.m, "alice", tc.opts...)
			}
			for alias := range tc.want {
				for _, what := range []string{"sampling", "elicitation"} {
					callChild(t, u, alias, "ask", map[string]any{"what": what, "deferred": true}, nil)
				}
			}
			rootsListChanged(t, u)
			for alias, wants := range tc.want {
				for what, want := range wants {
					prefix := "asked " + what + " "
					if what == "roots" {
						prefix = "roots "
					}
					// The last roots answer: a stdio client that declares
					// roots had the children ask once before.
					line := l.waitRecord(t, alias, prefix)
					if what == "roots" {
						for _, r := range l.recordOf(alias) {
							if strings.HasPrefix(r, prefix) {
								line = r
							}
						}
					}
					if !strings.Contains(line, want) {
						t.Errorf("%s %s: %q, want %q", alias, what, line, want)
					}
				}
			}
		})
	}
}
