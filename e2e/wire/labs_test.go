package wire

import (
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// labHidden are labserver's test-only tools, hidden in every lab.
var labHidden = []string{"crash_for_test", "spawn_grandchild", "notify_changed"}

// server is s passed GORACE from mcpmux's environment (see TestMain).
func server(s ts.Server) ts.Server {
	s.Extra += "\ninherit_env = [\"GORACE\"]"
	return s
}

// fidelityServer is a labserver offering prompts, resources, templates and
// completion (LAB_FIDELITY) besides its tools.
func fidelityServer(alias string) ts.Server {
	return server(ts.Server{Alias: alias, Env: map[string]string{"LAB_FIDELITY": "1"}, Hide: labHidden})
}

// readerPolicy is the policy of the catalog labs: docs' tools and prompts
// but append_note, only tickets' search and brief; docs' resources only; a
// rule on echo's arguments, and one on claims that hides pick (no caller
// here has claims).
const readerPolicy = `allow = ["docs__*", "tickets__search", "tickets__brief"]
deny = ["docs__append_note"]
allow_resources = ["docs"]

[[rule]]
tools = ["docs__echo"]
deny_if = 'args.message == "forbidden"'
message = "echo may not say forbidden"

[[rule]]
tools = ["docs__pick"]
allow_if = 'has(claims.team) && claims.team == "ops"'
`

// catalogLab is two fidelity labservers, docs and tickets, under
// readerPolicy, with the [mux] lines given.
func catalogLab(muxLines string) func(t *testing.T) *ts.Lab {
	return func(t *testing.T) *ts.Lab {
		lab := ts.NewLab(t, muxLines, fidelityServer("docs"), fidelityServer("tickets"))
		lab.WritePolicy(t, "reader", readerPolicy)
		return lab
	}
}

// plainLab is one labserver, docs, that reader may use entirely.
func plainLab(muxLines string) func(t *testing.T) *ts.Lab {
	return func(t *testing.T) *ts.Lab {
		lab := ts.NewLab(t, muxLines, server(ts.Server{Alias: "docs", Hide: labHidden}))
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		return lab
	}
}
