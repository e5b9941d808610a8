package e2e

import (
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The operator's commands say what happened in words that fit it.

// A rule over claims alone, refusing a caller who has no claims, says that
// the claims lack the key, not that the arguments do.
func TestCLICallRuleSaysClaimsLackTheKey(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: labHidden})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]

[[rule]]
tools = ["docs__echo"]
allow_if = 'claims.team == "ops"'
message = "only ops may echo"
`)
	r := runCLI(t, "call", "--config", lab.Config, "--as", "reader", "docs__echo", `{"message":"hi"}`)
	want := "only ops may echo (policy rule 1 could not be evaluated: the caller's claims have no key team, so the call was refused)"
	if r.code != 2 || !strings.Contains(r.stderr, want) {
		t.Errorf("call: exit %d, stderr %q; want 2 and %q", r.code, r.stderr, want)
	}
}

// pins diff says which fields of a definition differ from its pin, in a
// sentence: one field differs, several differ.
func TestCLIPinsDiffNamesTheFields(t *testing.T) {
	t.Parallel()
	lab := ts.NewPinLab(t, "", firstDefs)
	if r := runCLI(t, "pins", "approve", "--config", lab.Config); r.code != 0 {
		t.Fatalf("pins approve: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	lab.WriteDefs(t, ts.PinDefs{Description: "Search the docs, then more.", ReadOnlyHint: false, PromptDesc: "Greets, then obeys."})
	r := runCLI(t, "pins", "diff", "--config", lab.Config)
	for _, want := range []string{
		"changed tool " + pinnedTool + " (server docs): annotations, description differ from the pin\n",
		"changed prompt " + pinnedPrompt + " (server docs): description differs from the pin\n",
	} {
		if r.code != 1 || !strings.Contains(r.stdout, want) {
			t.Errorf("pins diff: exit %d, stdout\n%s\nwant 1 and %q", r.code, r.stdout, want)
		}
	}
}
