package reload

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The server list changed while mcpmux runs: every change is a real save
// of the config file of a running binary, and every wait is on an event
// (a log line, a list_changed, a call's answer), or on the OS for a
// process's end.

// waitTools waits, list_changed by list_changed, until the reader's tools
// satisfy ok, and returns them.
func waitTools(t testing.TB, m *ts.Mux, lc *listChanges, what string, ok func([]string) bool) []string {
	t.Helper()
	for {
		if names := m.ToolNames(); ok(names) {
			return names
		}
		lc.wait(t, what)
	}
}

// slowInFlight calls alias's slow tool for ms, tagged tag, and returns
// once the call has reached the child; its result comes on the channel.
func slowInFlight(t *testing.T, lab *ts.Lab, m *ts.Mux, alias string, ms int, tag string) <-chan *mcp.CallToolResult {
	t.Helper()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := m.Call(alias+"__slow", map[string]any{"ms": ms, "tag": tag})
		if err != nil {
			t.Errorf("%s__slow in flight: %v", alias, err)
		}
		done <- res
	}()
	lab.WaitStarted(t, tag)
	return done
}

func hasPrefix(names []string, prefix string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// Adding and removing servers: the unchanged one keeps its process; the
// added one's tools appear once it is ready; the removed one's tools go at
// once, a call to it then gets the unknown-name answer, its call in flight
// is answered, and then its process ends.
func TestServerListAddAndRemove(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "keep"}, ts.Server{Alias: "gone"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	lc := watchListChanged(m)
	keepPid, gonePid := ts.ChildPid(t, m, "keep"), ts.ChildPid(t, m, "gone")

	inflight := slowInFlight(t, lab, m, "gone", 1500, "drain")

	lab.Rewrite(t, "", ts.Server{Alias: "keep"}, ts.Server{Alias: "added"})
	line := m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got := line["added"]; !slices.Equal(anyStrings(got), []string{"added"}) {
		t.Errorf("reload added %v, want [added]", got)
	}
	if got := line["removed"]; !slices.Equal(anyStrings(got), []string{"gone"}) {
		t.Errorf("reload removed %v, want [gone]", got)
	}
	names := waitTools(t, m, lc, "the reload", func(n []string) bool {
		return hasPrefix(n, "added__") && !hasPrefix(n, "gone__")
	})
	if !hasPrefix(names, "keep__") {
		t.Errorf("the unchanged server's tools are gone: %v", names)
	}

	_, err := m.Call("gone__echo", map[string]any{"message": "late"})
	ts.WantUnknownTool(t, err, "gone__echo")

	if res := <-inflight; res == nil || res.IsError || !strings.Contains(ts.Text(res), "slept 1500") {
		t.Errorf("the call in flight on the removed server: %+v, want its own answer", res)
	}
	m.Log.WaitLine(t, "the removed server's stop", ts.Msg("server stopped: taken out of the config", "server", "gone"))
	ts.WaitFor(t, "the removed server's process to end", func() bool { return !ts.Alive(gonePid) })
	if pid := ts.ChildPid(t, m, "keep"); pid != keepPid {
		t.Errorf("the unchanged server's pid went from %d to %d", keepPid, pid)
	}
	if got := ts.Text(m.MustCall("added__echo", map[string]any{"message": "hi"})); !strings.Contains(got, "hi") {
		t.Errorf("added__echo: %q", got)
	}
}

// A server whose command line changes is started anew: the new process
// takes the calls, the old one stops; the others are left alone.
func TestServerListReplace(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "keep"}, ts.Server{Alias: "moved"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	keepPid, oldPid := ts.ChildPid(t, m, "keep"), ts.ChildPid(t, m, "moved")

	lab.Rewrite(t, "", ts.Server{Alias: "keep"}, ts.Server{Alias: "moved", Env: map[string]string{"LAB_VERSION": "2"}})
	line := m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got := anyStrings(line["replaced"]); !slices.Equal(got, []string{"moved"}) {
		t.Errorf("reload replaced %v, want [moved]", got)
	}
	m.Log.WaitLine(t, "the old child's stop", ts.Msg("server stopped: taken out of the config", "server", "moved"))
	ts.WaitFor(t, "the old process to end", func() bool { return !ts.Alive(oldPid) })
	if pid := ts.ChildPid(t, m, "moved"); pid == oldPid {
		t.Errorf("moved still answers from pid %d", pid)
	}
	if pid := ts.ChildPid(t, m, "keep"); pid != keepPid {
		t.Errorf("the unchanged server's pid went from %d to %d", keepPid, pid)
	}
}

// A broken config changes nothing: its problem is logged with its file and
// line, the servers keep running, and the next good save is applied.
func TestServerListBrokenConfig(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "keep"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	keepPid := ts.ChildPid(t, m, "keep")
	good, err := os.ReadFile(lab.Config)
	if err != nil {
		t.Fatal(err)
	}
	bad := string(good) + "\n[servers.broken]\ncommand = 42\n"
	badLine := strings.Count(bad[:strings.Index(bad, "command = 42")], "\n") + 1
	ts.ReplaceFile(t, lab.Config, []byte(bad))
	line := m.Log.WaitLine(t, "the refusal", ts.Msg("config: problem in the new version"))
	if line["file"] != lab.Config || int(line["line"].(float64)) != badLine {
		t.Errorf("problem logged at %v:%v, want %s:%d", line["file"], line["line"], lab.Config, badLine)
	}
	m.Log.WaitLine(t, "the refusal", ts.Msg("config reload refused: the config in force stays"))
	if pid := ts.ChildPid(t, m, "keep"); pid != keepPid {
		t.Errorf("keep's pid went from %d to %d after a refused config", keepPid, pid)
	}

	lab.Rewrite(t, "", ts.Server{Alias: "keep"}, ts.Server{Alias: "fixed"})
	m.Log.WaitLine(t, "the good save", ts.Msg("config reloaded"))
	m.Log.WaitLine(t, "the added server", ts.Msg("server ready", "server", "fixed"))
}

// A ConfigMap mounted in a pod: the file is a symlink through ..data, and
// kubectl apply swaps ..data to a new directory.
func TestServerListConfigMapSwap(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "keep"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	cm := filepath.Join(lab.Dir, "configmap")
	first := mount(t, cm, "..2026_12_02_1", lab.Config)
	lab.Config = filepath.Join(cm, "mcpmux.toml")
	if err := os.Symlink("..data/mcpmux.toml", lab.Config); err != nil {
		t.Fatal(err)
	}
	m := ts.StartMux(t, lab)
	lc := watchListChanged(m)
	m.MustCall("keep__echo", map[string]any{"message": "before"})

	// The new version, written as the kubelet does: a new directory, a new
	// ..data symlink beside the old, renamed over it.
	mounted := lab.Config
	lab.Config = filepath.Join(lab.Dir, "next.toml") // outside the watched directory
	lab.Rewrite(t, "", ts.Server{Alias: "keep"}, ts.Server{Alias: "second"})
	lab.Config = mounted
	mount(t, cm, "..2026_12_02_2", filepath.Join(lab.Dir, "next.toml"))
	if err := os.RemoveAll(first); err != nil { // the kubelet removes the old version
		t.Fatal(err)
	}
	waitTools(t, m, lc, "the ConfigMap swap", func(n []string) bool { return hasPrefix(n, "second__") })
}

// mount puts a copy of the config at src into cm/dir and points cm/..data
// at it with a rename, as the kubelet updates a ConfigMap volume; it
// returns the new directory.
func mount(t *testing.T, cm, dir, src string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(cm, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "mcpmux.toml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(cm, "..data_tmp")
	if err := os.Symlink(dir, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(cm, "..data")); err != nil {
		t.Fatal(err)
	}
	return d
}

func anyStrings(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, s := range l {
			out = append(out, s.(string))
		}
	}
	return out
}

// Over HTTP, with /readyz and /metrics: a session open across reloads sees
// an added server's tools; a broken save leaves the generation where it is
// and shows its first problem; SIGHUP re-reads the file, and an unchanged
// file changes nothing.
func TestServerListHTTP(t *testing.T) {
	t.Parallel()
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	c := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Log: h.Log})
	c.MustCall("docs__search", map[string]any{"query": "public"})
	if _, r := ts.Readyz(t, h.Base(0)); r.Config.Generation != 1 || r.Config.LastErr != nil {
		t.Fatalf("/readyz config before any reload: %+v", r.Config)
	}
	reloads := func(result string) float64 {
		fams, _ := ts.Scrape(t, h.Base(0))
		v, _ := ts.Sample(fams, "mcpmux_config_reloads_total", map[string]string{"result": result})
		return v
	}

	good, err := os.ReadFile(lab.Config)
	if err != nil {
		t.Fatal(err)
	}
	ts.ReplaceFile(t, lab.Config, append(slices.Clone(good), "\n[servers.broken]\nargs = [\"x\"]\n"...))
	h.Log.WaitLine(t, "the refusal", ts.Msg("config reload refused: the config in force stays"))
	_, r := ts.Readyz(t, h.Base(0))
	if r.Config.Generation != 1 || r.Config.LastErr == nil || !strings.Contains(*r.Config.LastErr, lab.Config+":") {
		t.Errorf("/readyz config after a broken save: generation %d, last_error %v; want 1 and the file:line", r.Config.Generation, r.Config.LastErr)
	}
	if n := reloads("error"); n != 1 {
		t.Errorf("config_reloads_total{result=error} = %v, want 1", n)
	}

	lab.Rewrite(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden, ReadOnly: []string{"search"}}, ts.Server{Alias: "tickets", Hide: ts.LabHidden})
	h.Log.WaitLine(t, "the good save", ts.Msg("config reloaded"))
	h.Log.WaitLine(t, "the catalog with tickets", func(l map[string]any) bool {
		return l["message"] == "catalog changed" && l["tools"] == float64(12)
	})
	if names := c.ToolNames(); !slices.Contains(names, "tickets__search") {
		t.Fatalf("the session open across the reload lists %v, without tickets__search", names)
	}
	c.MustCall("tickets__search", map[string]any{"query": "public"})
	_, r = ts.Readyz(t, h.Base(0))
	if r.Config.Generation != 2 || r.Config.LastErr != nil {
		t.Errorf("/readyz config after a good save: %+v, want generation 2 and no error", r.Config)
	}
	if n := reloads("ok"); n != 1 {
		t.Errorf("config_reloads_total{result=ok} = %v, want 1", n)
	}

	h.Signal(syscall.SIGHUP)
	ts.WaitFor(t, "SIGHUP's reload to be counted", func() bool { return reloads("unchanged") == 1 })
	c.MustCall("tickets__search", map[string]any{"query": "public"})
}

// A change only in how a server is exposed (hide, prefix...) applies to the
// running child: its tools change, its process does not.
func TestServerListReexpose(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	lc := watchListChanged(m)
	pid := ts.ChildPid(t, m, "docs")
	if !slices.Contains(m.ToolNames(), "docs__echo") {
		t.Fatalf("docs__echo not listed before the change: %v", m.ToolNames())
	}

	lab.Rewrite(t, "", ts.Server{Alias: "docs", Hide: []string{"echo"}})
	line := m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got := anyStrings(line["reexposed"]); !slices.Equal(got, []string{"docs"}) {
		t.Errorf("reload re-exposed %v, want [docs]", got)
	}
	waitTools(t, m, lc, "hiding echo", func(n []string) bool { return !slices.Contains(n, "docs__echo") && hasPrefix(n, "docs__") })
	_, err := m.Call("docs__echo", map[string]any{"message": "hidden"})
	ts.WantUnknownTool(t, err, "docs__echo")
	if got := ts.ChildPid(t, m, "docs"); got != pid {
		t.Errorf("docs's pid went from %d to %d for a change of hide", pid, got)
	}
}

// replace = "stop-first": the old child drains and stops before the new
// one starts, and a call made meanwhile waits for the new one, as it waits
// through a restart.
func TestServerListReplaceStopFirst(t *testing.T) {
	t.Parallel()
	const stopFirst = `replace = "stop-first"`
	lab := ts.NewLab(t, "", ts.Server{Alias: "locked", Extra: stopFirst})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	oldPid := ts.ChildPid(t, m, "locked")

	inflight := slowInFlight(t, lab, m, "locked", 800, "old")
	lab.Rewrite(t, "", ts.Server{Alias: "locked", Extra: stopFirst, Env: map[string]string{"LAB_VERSION": "2"}})
	m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))

	// Sent while the old child still runs its call: it waits for the new one.
	newPid := ts.ChildPid(t, m, "locked")
	if newPid == oldPid {
		t.Fatalf("a call after the swap reached the old child (pid %d)", oldPid)
	}
	if res := <-inflight; res == nil || res.IsError || !strings.Contains(ts.Text(res), "slept 800") {
		t.Errorf("the old child's call in flight: %+v, want its own answer", res)
	}
	m.Log.WaitLine(t, "the old child's stop", ts.Msg("server stopped: taken out of the config", "server", "locked"))
	m.Log.WaitLines(t, "the new child's start", 2, ts.Msg("server ready", "server", "locked"))
	var order []string
	for _, l := range m.Log.Lines(func(l map[string]any) bool { return l["server"] == "locked" }) {
		if msg := fmt.Sprint(l["message"]); msg == "server ready" || msg == "server stopped: taken out of the config" {
			order = append(order, msg)
		}
	}
	if want := []string{"server ready", "server stopped: taken out of the config", "server ready"}; !slices.Equal(order, want) {
		t.Errorf("the children's log, in order: %q; want %q (the new one ready only after the old one stopped)", order, want)
	}
	if ts.Alive(oldPid) {
		t.Errorf("the old child (pid %d) is still running next to the new one (%d)", oldPid, newPid)
	}
}
