package calls

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// seedLab is the source document's setup: two children offering a tool with
// the same name, search, and a test-only crash_for_test that stays hidden.
func seedLab(t *testing.T, muxLines string) *ts.Lab {
	lab := ts.NewLab(t, muxLines,
		ts.Server{Alias: "docs", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search"}},
		ts.Server{Alias: "tickets", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search"}},
	)
	return lab
}

// TestSeedDocument is the document's whole walk-through, and its exercise:
// reader gains read-only tickets, the child's own refusal of "private"
// stays in force, the two search tools answer from different sources, each
// answer keeps its own request, and a name with no mapping is refused.
func TestSeedDocument(t *testing.T) {
	t.Parallel()
	lab := seedLab(t, "")
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`+"\n"+`allow_read_only = ["tickets__*"]`)
	m := ts.StartMux(t, lab)

	names := m.ToolNames()
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
		if strings.Contains(n, "crash_for_test") {
			t.Errorf("hidden tool %s is listed", n)
		}
	}
	for _, want := range []string{"docs__search", "tickets__search", "docs__append_note"} {
		if !has[want] {
			t.Errorf("%s missing from %v", want, names)
		}
	}
	if has["tickets__append_note"] {
		t.Errorf("tickets__append_note is listed, but reader has only read-only tickets")
	}

	// The same tool name on two servers answers from two sources.
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs__search = %q", got)
	}
	if got := ts.Text(m.MustCall("tickets__search", map[string]any{"query": "public"})); got != "tickets: public evidence" {
		t.Errorf("tickets__search = %q", got)
	}
	ts.Audit(m, t, "tickets__search", "allowed")

	// An authorised call refused by the child's own policy is a failure the
	// caller sees, not something hidden.
	res := m.MustCall("tickets__search", map[string]any{"query": "private"})
	if !res.IsError || ts.Text(res) != "service policy denies private data" {
		t.Errorf("private: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	if line := m.Log.WaitLine(t, "tool_error audit", ts.Msg("call", "tool", "tickets__search", "outcome", "tool_error")); line["decision"] != "allowed" {
		t.Errorf("audit %v", line)
	}

	// A wrong argument type never reaches the child.
	res = m.MustCall("docs__search", map[string]any{"query": 3})
	if !res.IsError || !strings.Contains(ts.Text(res), "/query") {
		t.Errorf("invalid arguments: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	ts.Audit(m, t, "docs__search", "invalid")

	// Unmapped, hidden and out-of-policy names get one and the same refusal.
	for _, c := range []struct{ name, decision string }{
		{"nope__search", "unknown"},
		{"search", "unknown"},
		{"docs__crash_for_test", "hidden"},
		{"tickets__append_note", "denied"},
	} {
		_, err := m.Call(c.name, map[string]any{"text": "x"})
		ts.WantUnknownTool(t, err, c.name)
		ts.Audit(m, t, c.name, c.decision)
	}
	if notes := lab.NotesOf(t, "tickets"); notes != "" {
		t.Errorf("a refused write reached tickets: %q", notes)
	}

	// Each concurrent answer is the answer to its own request.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			alias := []string{"docs", "tickets"}[i%2]
			msg := fmt.Sprintf("call-%d", i)
			res, err := m.Call(alias+"__echo", map[string]any{"message": msg})
			if err != nil {
				t.Errorf("%s: %v", msg, err)
				return
			}
			if got, want := ts.Text(res), alias+": "+msg; got != want {
				t.Errorf("answer crossed: got %q, want %q", got, want)
			}
		})
	}
	wg.Wait()
}

// TestAuditNeverLogsArguments checks that argument values stay out of the
// log at info level.
func TestAuditNeverLogsArguments(t *testing.T) {
	t.Parallel()
	lab := seedLab(t, "")
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	const secret = "s3cr3t-value-xyz"
	m.MustCall("docs__echo", map[string]any{"message": secret})
	m.MustCall("docs__search", map[string]any{"query": 12345.678})
	_, _ = m.Call("nope__x", map[string]any{"message": secret})
	ts.Audit(m, t, "nope__x", "unknown")
	m.Stop()
	if strings.Contains(m.Log.Text(), secret) || strings.Contains(m.Log.Text(), "12345.678") {
		t.Errorf("argument values appear in the log:\n%s", m.Log.Text())
	}
}

// Clients of the 2026-07-28 protocol, which has no initialize, get the same
// catalog and answers, keyed on the same identity.
func TestModernProtocolClient(t *testing.T) {
	t.Parallel()
	lab := seedLab(t, "")
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	m := ts.StartMuxModern(t, lab)
	names := m.ToolNames()
	if !ts.Contains(names, "docs__search") || ts.Contains(names, "tickets__search") {
		t.Fatalf("tools = %v", names)
	}
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs__search = %q", got)
	}
	_, err := m.Call("tickets__search", map[string]any{"query": "public"})
	ts.WantUnknownTool(t, err, "tickets__search")
}
