package reload

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/client"
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

// labRecord is one line of a labserver's records (LAB_RECORDS_DIR): a
// probe or record call as the child itself saw it run.
type labRecord struct {
	Op     string `json:"op"`
	Key    string `json:"key"`
	Source string `json:"source"`
	Pid    int    `json:"pid"`
}

// runsOf returns the pids of the children that ran the call keyed key,
// from the records in dir, one entry per run.
func runsOf(t *testing.T, dir, key string) []int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("reading the child's records: %v", err)
		}
		for l := range strings.Lines(string(b)) {
			var r labRecord
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%s: %q: %v", f, l, err)
			}
			if r.Key == key {
				pids = append(pids, r.Pid)
			}
		}
	}
	return pids
}

// recordedInFlight calls alias's tool (probe or record) keyed key for ms,
// and returns once the child has recorded it; its result comes on the
// channel.
func recordedInFlight(t *testing.T, m *ts.Mux, records, alias, tool, key string, ms int) <-chan *mcp.CallToolResult {
	t.Helper()
	arg := map[string]string{"probe": "nonce", "record": "id"}[tool]
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := m.Call(alias+"__"+tool, map[string]any{arg: key, "ms": ms})
		if err != nil {
			t.Errorf("%s__%s in flight: %v", alias, tool, err)
		}
		done <- res
	}()
	ts.WaitFor(t, tool+" "+key+" to reach its child", func() bool { return len(runsOf(t, records, key)) > 0 })
	return done
}

// A reload that lowers call_timeout and replaces a server start-first
// drains the old child only for the new timeout: a call in flight there
// under its older, longer timeout is cut when the old child stops. A
// read-only call so cut is re-run on the new child and answered from
// there; a write is not re-run, and its caller is told it may or may not
// have taken effect. A read-only call cut on a server taken out of the
// list has nowhere to be re-run: it gets that answer too, at once.
func TestServerListReplaceCutsCalls(t *testing.T) {
	t.Parallel()
	records := t.TempDir()
	env := func(version string) map[string]string {
		return map[string]string{"LAB_RECORDS_DIR": records, "LAB_VERSION": version}
	}
	lab := ts.NewLab(t, `call_timeout = "30s"`, ts.Server{Alias: "moved", Env: env("1")}, ts.Server{Alias: "gone", Env: env("1")})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	oldPid, gonePid := ts.ChildPid(t, m, "moved"), ts.ChildPid(t, m, "gone")

	read := recordedInFlight(t, m, records, "moved", "probe", "read", 4000)
	write := recordedInFlight(t, m, records, "moved", "record", "write", 4000)
	orphan := recordedInFlight(t, m, records, "gone", "probe", "orphan", 4000)
	lab.Rewrite(t, `call_timeout = "1s"`, ts.Server{Alias: "moved", Env: env("2")})
	line := m.Log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
	if got := anyStrings(line["replaced"]); !slices.Equal(got, []string{"moved"}) {
		t.Fatalf("reload replaced %v, want [moved]", got)
	}
	if got := anyStrings(line["removed"]); !slices.Equal(got, []string{"gone"}) {
		t.Fatalf("reload removed %v, want [gone]", got)
	}
	m.Log.WaitLine(t, "the old child's stop", ts.Msg("server stopped: taken out of the config", "server", "moved"))

	res := <-orphan
	if res == nil || !res.IsError || !strings.Contains(ts.Text(res), "may or may not have taken effect") ||
		!strings.Contains(ts.Text(res), "taken out of the config") {
		t.Errorf("the read-only call cut on the removed server: %+v, want the may-or-may-not answer naming the removal", res)
	}
	if got := runsOf(t, records, "orphan"); !slices.Equal(got, []int{gonePid}) {
		t.Errorf("the call on the removed server ran on pids %v, want only on its child %d", got, gonePid)
	}
	newPid := ts.ChildPid(t, m, "moved")
	if newPid == oldPid {
		t.Fatalf("moved still answers from pid %d after the replace", oldPid)
	}

	res = <-write
	if res == nil || !res.IsError || !strings.Contains(ts.Text(res), "may or may not have taken effect") {
		t.Errorf("the write cut by the swap: %+v, want the may-or-may-not answer", res)
	}
	if got := runsOf(t, records, "write"); !slices.Equal(got, []int{oldPid}) {
		t.Errorf("the write ran on pids %v, want only on the old child %d", got, oldPid)
	}

	res = <-read
	var rec labRecord
	if res == nil || res.IsError || json.Unmarshal([]byte(ts.Text(res)), &rec) != nil || rec.Pid != newPid {
		t.Fatalf("the read-only call cut by the swap: %+v, want the answer of the new child %d", res, newPid)
	}
	if got := runsOf(t, records, "read"); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values([]int{oldPid, newPid}))) {
		t.Errorf("the read-only call ran on pids %v, want once on the old child %d and once on the new %d", got, oldPid, newPid)
	}
	m.Log.WaitLine(t, "the audit of the re-run call", ts.Msg("call", "tool", "moved__probe", "outcome", "retried"))
}

// A reload that adds, replaces and removes other servers leaves an
// unchanged one alone: its process, and the subscriptions sessions hold to
// its resources, so that an update of a subscribed resource still reaches
// the client, under the URI it subscribed with.
func TestServerListKeepsSubscriptions(t *testing.T) {
	t.Parallel()
	const readme = "file:///lab/readme.txt"
	exposed := "mcpmux://keep/" + readme
	for _, over := range []string{"stdio", "http"} {
		t.Run(over, func(t *testing.T) {
			t.Parallel()
			requests := filepath.Join(t.TempDir(), "requests.keep")
			server := func(alias string, env map[string]string) ts.Server {
				return ts.Server{Alias: alias, Env: env, Hide: ts.LabHidden, ReadOnly: []string{"search"}}
			}
			keep := server("keep", ts.FidelityEnv(requests))
			before := []ts.Server{keep, server("moved", nil), server("gone", nil)}
			after := []ts.Server{keep, server("moved", map[string]string{"LAB_VERSION": "2"}), server("added", nil)}

			var lab *ts.Lab
			var log *ts.LogTap
			var c *client.Client
			var note func(method string) mcp.JSONRPCNotification
			var call func(name string, args map[string]any) *mcp.CallToolResult
			if over == "stdio" {
				lab = ts.NewLab(t, "", before...)
				lab.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"keep\"]\n")
				m := ts.StartMux(t, lab)
				log, c, note = m.Log, m.Client, m.Notification
				call = func(name string, args map[string]any) *mcp.CallToolResult { return m.MustCall(name, args) }
			} else {
				lab = ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`, before...)
				lab.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"keep\"]\n")
				h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
				conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION, Listen: true, Log: h.Log})
				log, c, note = h.Log, conn.Client, conn.Notification
				call = func(name string, args map[string]any) *mcp.CallToolResult { return conn.MustCall(name, args) }
			}
			pid := func() string { return ts.Text(call("keep__whoami", nil)) }
			keepPid := pid()
			ts.MustRPC(t, c, "resources/subscribe", map[string]any{"uri": exposed})

			lab.Rewrite(t, "", after...)
			line := log.WaitLine(t, "the reload", ts.Msg("config reloaded"))
			for key, want := range map[string][]string{"added": {"added"}, "replaced": {"moved"}, "removed": {"gone"}} {
				if got := anyStrings(line[key]); !slices.Equal(got, want) {
					t.Errorf("reload %s %v, want %v", key, got, want)
				}
			}
			log.WaitLines(t, "the stops of the replaced and the removed child", 2, ts.Msg("server stopped: taken out of the config"))

			if got := ts.Text(call("keep__touch", map[string]any{"uri": readme})); got != "notified: "+readme {
				t.Fatalf("keep__touch after the reload: %q, want the child still subscribed", got)
			}
			if n := note(string(mcp.MethodNotificationResourceUpdated)); n.Params.AdditionalFields["uri"] != exposed {
				t.Errorf("resources/updated after the reload: %v, want uri %s", n.Params.AdditionalFields, exposed)
			}
			if got := pid(); got != keepPid {
				t.Errorf("keep's pid went from %s to %s", keepPid, got)
			}
			if n := len(ts.ChildRequests(t, requests, "resources/subscribe")); n != 1 {
				t.Errorf("keep received %d resources/subscribe, want the client's one", n)
			}
		})
	}
}
