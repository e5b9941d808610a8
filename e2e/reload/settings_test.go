package reload

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
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

// policy_dir and pin_file moved by a reload: the policies and pins of the
// new place are in force as one step, and their watchers follow them there
// (a pin approved in the new file lists its tool); a policy_dir that does
// not exist refuses the whole version.
func TestPolicyDirAndPinFileMove(t *testing.T) {
	t.Parallel()
	const enforce = `pinning = "enforce"`
	lab := ts.NewPinLab(t, enforce, ts.FirstDefs)
	m := ts.StartMux(t, lab.Lab)
	pid := ts.ChildPid(t, m, "docs")
	if names := m.ToolNames(); !slices.Contains(names, ts.PinnedTool) || !slices.Contains(names, "docs__echo") {
		t.Fatalf("before the move the reader lists %v", names)
	}
	servers := ts.Server{Alias: "docs", Env: map[string]string{"LAB_DEFS": lab.Defs, "LAB_REQUESTS": lab.Requests, "LAB_FAIL_INIT_FILE": lab.FailStart}}

	oldDir := lab.PolicyDir
	lab.PolicyDir = filepath.Join(lab.Dir, "no-such-dir")
	lab.Rewrite(t, enforce+"\n"+`pin_file = "moved.lock"`, servers)
	m.Log.WaitLine(t, "the refusal", ts.Msg("config reload refused: the config in force stays"))
	if got := m.Log.Lines(ts.Msg("policies moved")); len(got) != 0 {
		t.Fatalf("a refused version moved the policies: %v", got)
	}

	lab.PolicyDir = filepath.Join(lab.Dir, "moved-policies")
	if err := os.Mkdir(lab.PolicyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lab.WritePolicy(t, "reader", `allow = ["docs__pinned", "docs__late", "docs__whoami"]`)
	lab.Rewrite(t, enforce+"\n"+`pin_file = "moved.lock"`, servers)
	line := m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got, want := anyStrings(line["settings"]), []string{"mux.policy_dir", "mux.pin_file"}; !slices.Equal(got, want) {
		t.Errorf("reload put in force %v, want %v", got, want)
	}
	moved := m.Log.WaitLine(t, "the policies moved", ts.Msg("policies moved"))
	if moved["from"] != oldDir || moved["dir"] != lab.PolicyDir {
		t.Errorf("policies moved from %v to %v, want %s to %s", moved["from"], moved["dir"], oldDir, lab.PolicyDir)
	}
	m.WaitTools("the moved policy", func(n []string) bool {
		return len(n) == 2 && slices.Contains(n, ts.PinnedTool) && slices.Contains(n, "docs__whoami")
	})
	newPins := filepath.Join(lab.Dir, "moved.lock")
	ts.WaitFor(t, "the new pin file's first-sight pins", func() bool { _, err := os.Stat(newPins); return err == nil })

	// A tool the child adds now is held: the new file has pins. Approved
	// there, the running mcpmux lists it.
	late := ts.FirstDefs
	late.ExtraTool = "late"
	lab.WriteDefs(t, late)
	m.MustCall(ts.PinnedTool, map[string]any{"q": "x"})
	if _, err := m.Call("docs__reload_defs", nil); err == nil {
		t.Fatal("docs__reload_defs answered under a policy that does not allow it")
	}
	lab.PolicyDir = oldDir // the old directory must no longer count
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	lab.PolicyDir = filepath.Join(lab.Dir, "moved-policies")
	lab.WritePolicy(t, "reader", `allow = ["docs__pinned", "docs__late", "docs__whoami", "docs__reload_defs"]`)
	m.WaitTools("reload_defs allowed", func(n []string) bool { return slices.Contains(n, "docs__reload_defs") })
	m.MustCall("docs__reload_defs", nil)
	m.Log.WaitLine(t, "the new tool held", func(l map[string]any) bool { return l["tool"] == "docs__late" && l["held"] == true })
	if r := ts.RunCLI(t, "pins", "approve", "--config", lab.Config, "docs__late"); r.Code != 0 {
		t.Fatalf("pins approve exited %d:\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	names := m.WaitTools("the approved tool", func(n []string) bool { return slices.Contains(n, "docs__late") })
	if slices.Contains(names, "docs__echo") {
		t.Errorf("the old policy directory's edit reached the reader: %v", names)
	}
	if got := ts.ChildPid(t, m, "docs"); got != pid {
		t.Errorf("the child was restarted (pid %d, then %d) by a move of policy_dir and pin_file", pid, got)
	}
}

// The session caps and the servers' max_in_flight default apply live: a
// raised max_sessions_per_identity admits the session it refused, the
// open one stays, and a new default re-exposes the server that takes it.
func TestLimitsLive(t *testing.T) {
	t.Parallel()
	docs := ts.Server{Alias: "docs"}
	lab := ts.HTTPLab(t, "\n[limits]\nmax_sessions_per_identity = 1", `listen = "127.0.0.1:0"`, docs)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	first := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Log: h.Log})
	if a := ts.PostInitialize(t, h.URL(), ""); a.Status != http.StatusTooManyRequests {
		t.Fatalf("a second session under max_sessions_per_identity 1: %d %q, want 429", a.Status, a.Body)
	}

	lab.Rewrite(t, "\n[limits]\nmax_sessions_per_identity = 2\nmax_in_flight = 8", docs)
	line := h.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got, want := anyStrings(line["settings"]), []string{"limits.max_sessions_per_identity", "limits.max_in_flight"}; !slices.Equal(got, want) {
		t.Errorf("reload put in force %v, want %v", got, want)
	}
	if got := anyStrings(line["reexposed"]); !slices.Equal(got, []string{"docs"}) {
		t.Errorf("reload re-exposed %v, want [docs] (its max_in_flight is the default's)", got)
	}
	if a := ts.PostInitialize(t, h.URL(), ""); a.Status != http.StatusOK {
		t.Errorf("a second session under max_sessions_per_identity 2: %d %q", a.Status, a.Body)
	}
	first.MustCall("docs__search", map[string]any{"query": "public"})
	if n := len(h.Log.Lines(ts.Msg("config: this key changed but needs a restart to take effect; the value mcpmux started with stays"))); n != 0 {
		t.Errorf("%d keys named as needing a restart", n)
	}
}
