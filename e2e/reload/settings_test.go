package reload

import (
	"slices"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The keys outside the server list that a reload puts in force: the call
// timeout, the rate limit and the log level take effect for the calls
// after the save, with the same child; a key that needs a restart is named
// and keeps its value.
func TestSettingsLive(t *testing.T) {
	t.Parallel()
	const started = `call_timeout = "30s"`
	docs := ts.Server{Alias: "docs"}
	lab := ts.NewLab(t, started, docs)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	pid := ts.ChildPid(t, m, "docs")
	wantEcho(t, m, "before")
	m.Log.WaitLine(t, "the audit line of a call at log_level info", ts.Msg("call", "tool", "docs__echo"))

	lab.Rewrite(t, `call_timeout = "1s"
log_level = "warn"
max_name_length = 40

[limits]
rate_limit = 0.001
rate_burst = 2`, docs)
	line := m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got, want := anyStrings(line["settings"]), []string{"mux.call_timeout", "mux.log_level", "limits.rate_limit", "limits.rate_burst"}; !slices.Equal(got, want) {
		t.Errorf("reload put in force %v, want %v", got, want)
	}
	m.Log.WaitLine(t, "the restart-only key named", ts.Msg("config: this key changed but needs a restart to take effect; the value mcpmux started with stays", "key", "mux.max_name_length"))

	wantEcho(t, m, "under warn")
	res := m.MustCall("docs__slow", map[string]any{"ms": 3000, "tag": "short-timeout"})
	if !res.IsError || !strings.Contains(ts.Text(res), "timed out after 1s") {
		t.Errorf("a 3 s call under call_timeout 1s: isError=%v %q", res.IsError, ts.Text(res))
	}
	res = m.MustCall("docs__echo", map[string]any{"message": "third"})
	if want := `rate limit exceeded for identity "reader": at most 0.001 calls per second (bursts of 2); try again later`; !res.IsError || ts.Text(res) != want {
		t.Errorf("a third call under a burst of 2: isError=%v %q, want %q", res.IsError, ts.Text(res), want)
	}

	lab.Rewrite(t, started, docs)
	m.Log.WaitLine(t, "the reload back", func(l map[string]any) bool {
		return l["message"] == "config reloaded" && l["generation"] == float64(3)
	})
	if res := m.MustCall("docs__search", map[string]any{"query": "public"}); res.IsError {
		t.Errorf("docs__search: %q", ts.Text(res))
	}
	// The log is in order: once the audit line of this call is out, those
	// of the calls under warn would be too.
	m.Log.WaitLine(t, "the audit line of a call at log_level info again", ts.Msg("call", "tool", "docs__search"))
	if got := m.Log.Lines(ts.Msg("call", "tool", "docs__echo")); len(got) != 1 {
		t.Errorf("audit lines of docs__echo: %d, want 1 (the calls made under warn are not logged): %v", len(got), got)
	}
	if got := m.Log.Lines(ts.Msg("call", "tool", "docs__slow")); len(got) != 0 {
		t.Errorf("the call made under warn was logged: %v", got)
	}
	res = m.MustCall("docs__slow", map[string]any{"ms": 1500, "tag": "long-timeout"})
	if res.IsError {
		t.Errorf("a 1.5 s call under call_timeout 30s again: %q", ts.Text(res))
	}
	if after := ts.ChildPid(t, m, "docs"); after != pid {
		t.Errorf("the child was restarted (pid %d, then %d) by a change of settings", pid, after)
	}
}
