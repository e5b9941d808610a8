package e2e

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// instructionsLab has three children in this config order: tickets and
// docs with instructions, plain without.
func instructionsLab(t *testing.T) *ts.Lab {
	t.Helper()
	return ts.NewLab(t, "",
		ts.Server{Alias: "tickets", Env: map[string]string{"LAB_INSTRUCTIONS": "Search before filing a ticket."}},
		ts.Server{Alias: "plain"},
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_INSTRUCTIONS": "Cite the page.\nQuote it exactly."}},
	)
}

const (
	ticketsSection = "## tickets\n\nSearch before filing a ticket."
	docsSection    = "## docs\n\nCite the page.\nQuote it exactly."
)

// TestInstructionsPerAlias: mcpmux's initialize (over stdio and HTTP) and a
// 2026-07-28 client's server/discover carry the instructions of every
// child the caller's policy lets it see anything of, each in a section
// under a heading naming its alias, in config order; a child without
// instructions has no section, and a caller who sees nothing of any child
// gets no instructions.
func TestInstructionsPerAlias(t *testing.T) {
	t.Parallel()
	both := ticketsSection + "\n\n" + docsSection
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		lab := instructionsLab(t)
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		if got := ts.StartMux(t, lab).Init.Instructions; got != both {
			t.Errorf("initialize instructions:\n%q\nwant\n%q", got, both)
		}
		if got := ts.StartMuxModern(t, lab).Init.Instructions; got != both {
			t.Errorf("server/discover instructions:\n%q\nwant\n%q", got, both)
		}
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		lab := instructionsLab(t)
		cases := []struct{ identity, policy, want string }{
			{"all", `allow = ["*"]`, both},
			{"docs", `allow = ["docs__*"]`, docsSection},
			{"resources", `allow_resources = ["tickets"]`, ""}, // tickets offers no resources
			{"none", `allow = []`, ""},
		}
		up := `listen = "127.0.0.1:0"`
		for _, c := range cases {
			lab.WritePolicy(t, c.identity, c.policy)
			up += tokenEntry(c.identity, "sha256", sha256Hex(fidelityToken(c.identity)))
		}
		lab.AddUpstream(t, up)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		for _, c := range cases {
			for _, version := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, ""} {
				conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: fidelityToken(c.identity), Version: version, Log: h.Log})
				if got := conn.Init.Instructions; got != c.want {
					t.Errorf("%s (protocol %q): instructions\n%q\nwant\n%q", c.identity, conn.ProtocolVersion(), got, c.want)
				}
			}
		}
	})
}
