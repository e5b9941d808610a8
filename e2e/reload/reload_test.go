package reload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Hot reload of policies through the running binary, as the "reader" stdio
// client sees it. Every change is made to real files in the policy
// directory of a running mcpmux, and every wait is on an event: the
// client's notifications/tools/list_changed or the policy store's log.

// listChanges records the notifications/tools/list_changed the client
// receives from the moment it is attached.
type listChanges struct{ ch chan struct{} }

func watchListChanged(m *ts.Mux) *listChanges {
	lc := &listChanges{ch: make(chan struct{}, 256)}
	m.Client.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case lc.ch <- struct{}{}:
			default:
			}
		}
	})
	return lc
}

// wait waits for the next list_changed.
func (lc *listChanges) wait(t testing.TB, why string) {
	t.Helper()
	select {
	case <-lc.ch:
	case <-time.After(ts.Wait):
		t.Fatalf("no notifications/tools/list_changed after %s", why)
	}
}

// none checks, without waiting, that no list_changed has arrived.
func (lc *listChanges) none(t *testing.T, why string) {
	t.Helper()
	select {
	case <-lc.ch:
		t.Errorf("reader received notifications/tools/list_changed after %s", why)
	default:
	}
}

func (lc *listChanges) drain() {
	for {
		select {
		case <-lc.ch:
		default:
			return
		}
	}
}

// reloads follows the policy store's "policies reloaded" log lines, each
// of which carries a generation higher than the one before.
type reloads struct {
	m   *ts.Mux
	gen float64
}

// wait waits for the next reload and checks that it changed exactly the
// given identities.
func (r *reloads) wait(t *testing.T, changed ...string) map[string]any {
	t.Helper()
	line := r.m.Log.WaitLine(t, fmt.Sprintf("a policy reload after generation %v", r.gen), func(l map[string]any) bool {
		g, _ := l["generation"].(float64)
		return l["message"] == "policies reloaded" && g > r.gen
	})
	r.gen = line["generation"].(float64)
	var got []string
	for _, v := range asSlice(line["changed"]) {
		got = append(got, fmt.Sprint(v))
	}
	if !slices.Equal(got, changed) {
		t.Errorf("reload %v changed %v, want %v", r.gen, got, changed)
	}
	return line
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// reloadMux starts mcpmux for the "reader" stdio client, with one docs
// child, and returns once what start-up itself announces is behind it: the
// first tools/list waits for the children, whose catalog (and its
// list_changed) is published before that list is answered, and a ping makes
// one more round trip before the recorder is emptied. What the recorder
// receives afterwards is caused by the test.
func reloadMux(t *testing.T, lab *ts.Lab) (*ts.Mux, *listChanges, *reloads) {
	t.Helper()
	m := ts.StartMux(t, lab)
	m.ToolNames()
	lc := watchListChanged(m)
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	if err := m.Client.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	lc.drain()
	return m, lc, &reloads{m: m}
}

func reloadLab(t *testing.T) *ts.Lab {
	t.Helper()
	return ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: []string{"crash_for_test"}})
}

// wantTools checks the tools the client is shown, in any order.
func wantTools(t *testing.T, m *ts.Mux, want ...string) {
	t.Helper()
	got := m.ToolNames()
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("tools/list = %v, want %v", got, want)
	}
}

// wantEcho checks that docs__echo answers.
func wantEcho(t *testing.T, m *ts.Mux, msg string) {
	t.Helper()
	res := m.MustCall("docs__echo", map[string]any{"message": msg})
	if res.IsError || ts.Text(res) != "docs: "+msg {
		t.Fatalf("docs__echo: isError=%v text=%q", res.IsError, ts.Text(res))
	}
}

// wantRefused checks that a call is refused with JSON-RPC -32602.
func wantRefused(t *testing.T, m *ts.Mux, name string, args any) {
	t.Helper()
	res, err := m.Call(name, args)
	if err == nil {
		t.Fatalf("call %s: want a -32602 refusal, got a result (isError=%v %q)", name, res.IsError, ts.Text(res))
	}
	if !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), name) {
		t.Fatalf("call %s: got %v, want -32602 naming the tool", name, err)
	}
}

// A grant and then a revoke, saved the way editors save (a temporary file
// renamed over the policy), take effect in the running mcpmux: the client
// is told its list changed, the list changes, and calls follow it. The
// child is not restarted either.
func TestReloadGrantThenRevoke(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search"))
	m, lc, rl := reloadMux(t, lab)
	wantTools(t, m, "docs__search")
	wantRefused(t, m, "docs__echo", map[string]any{"message": "before"})

	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search", "docs__echo"))
	lc.wait(t, "the grant")
	wantTools(t, m, "docs__search", "docs__echo")
	wantEcho(t, m, "granted")
	rl.wait(t, "reader")

	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search"))
	lc.wait(t, "the revoke")
	wantTools(t, m, "docs__search")
	wantRefused(t, m, "docs__echo", map[string]any{"message": "revoked"})
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("docs__search after the revoke = %q", got)
	}
	rl.wait(t, "reader")
	m.Log.WaitLine(t, "the revoked call's audit", ts.Msg("call", "tool", "docs__echo", "decision", "denied"))

	// One process, one child start: nothing was restarted to reload.
	if n := len(m.Log.Lines(ts.Msg("server ready"))); n != 1 {
		t.Errorf("%d server ready lines, want 1", n)
	}
	if n := len(m.Log.Lines(ts.Msg("mcpmux serving on stdio"))); n != 1 {
		t.Errorf("%d serving lines, want 1", n)
	}
}

// A policy file with a syntax error does not change anything: reader keeps
// its last good policy, mcpmux logs the file and the line, and nobody is
// told the list changed. Fixing the file then takes effect.
func TestReloadBrokenFileKeepsLastGoodPolicy(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	file := filepath.Join(lab.PolicyDir, "reader.toml")
	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search", "docs__echo"))
	m, lc, rl := reloadMux(t, lab)
	wantTools(t, m, "docs__search", "docs__echo")

	lab.WritePolicy(t, "reader", "# broken on purpose\nallow = [")
	line := m.Log.WaitLine(t, "the broken file's error", ts.Msg("policy file not loaded; its identity keeps its last good policy", "file", file))
	if line["level"] != "error" || line["line"] != float64(2) || !strings.Contains(fmt.Sprint(line["error"]), file+":2:") {
		t.Errorf("error line %v: want level error, line 2, and the error naming %s:2", line, file)
	}
	lc.none(t, "a broken save")
	wantTools(t, m, "docs__search", "docs__echo")
	wantEcho(t, m, "still allowed")

	// The fix is the next change reader hears of: had the broken save been
	// announced, the first notification would come before the fix took
	// effect.
	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search"))
	lc.wait(t, "the fix")
	wantTools(t, m, "docs__search")
	wantRefused(t, m, "docs__echo", map[string]any{"message": "after the fix"})
	rl.wait(t, "reader")
	if n := len(m.Log.Lines(ts.Msg("policies reloaded"))); n != 1 {
		t.Errorf("%d reloads logged, want only the fix's", n)
	}
}

// Deleting an identity's policy file takes all its access away.
func TestReloadDeletedFileRemovesAllAccess(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	m, lc, rl := reloadMux(t, lab)
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Fatalf("docs__search before the delete = %q", got)
	}

	if err := os.Remove(filepath.Join(lab.PolicyDir, "reader.toml")); err != nil {
		t.Fatal(err)
	}
	lc.wait(t, "the delete")
	if names := m.ToolNames(); len(names) != 0 {
		t.Fatalf("tools/list after the delete = %v, want none", names)
	}
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"docs__search", map[string]any{"query": "public"}},
		{"docs__echo", map[string]any{"message": "x"}},
		{"docs__whoami", nil},
	} {
		wantRefused(t, m, c.name, c.args)
	}
	rl.wait(t, "reader")
}

// A save that rewrites the file in place (no rename, the same inode) is
// seen too.
func TestReloadInPlaceWrite(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	file := filepath.Join(lab.PolicyDir, "reader.toml")
	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search"))
	before, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	m, lc, rl := reloadMux(t, lab)
	wantTools(t, m, "docs__search")

	if err := os.WriteFile(file, []byte(ts.AllowOnly("docs__search", "docs__echo")), 0o644); err != nil {
		t.Fatal(err)
	}
	lc.wait(t, "the in-place write")
	wantTools(t, m, "docs__search", "docs__echo")
	wantEcho(t, m, "in place")
	rl.wait(t, "reader")
	after, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("the write replaced the file; this test is about an in-place write")
	}
}

// A Kubernetes ConfigMap volume: the policy files are symbolic links
// through ..data to a timestamped directory, and an update swaps ..data
// atomically to a new directory and removes the old one.
func TestReloadKubernetesConfigMapSwap(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	dir := lab.PolicyDir
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// version writes a data directory holding reader.toml.
	version := func(name, body string) {
		t.Helper()
		must(os.Mkdir(filepath.Join(dir, name), 0o755))
		must(os.WriteFile(filepath.Join(dir, name, "reader.toml"), []byte(body), 0o644))
	}
	// swap points ..data at a new data directory the way kubelet does, and
	// removes the old one.
	swap := func(from, to string) {
		t.Helper()
		must(os.Symlink(to, filepath.Join(dir, "..data_tmp")))
		must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		must(os.RemoveAll(filepath.Join(dir, from)))
	}

	version("..2026_01", ts.AllowOnly("docs__search"))
	must(os.Symlink("..2026_01", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "reader.toml"), filepath.Join(dir, "reader.toml")))
	m, lc, rl := reloadMux(t, lab)
	wantTools(t, m, "docs__search")

	version("..2026_02", ts.AllowOnly("docs__search", "docs__echo"))
	swap("..2026_01", "..2026_02")
	lc.wait(t, "the first ..data swap")
	wantTools(t, m, "docs__search", "docs__echo")
	wantEcho(t, m, "from the ConfigMap")
	rl.wait(t, "reader")

	// And again: the watch survives a swap.
	version("..2026_03", ts.AllowOnly("docs__echo"))
	swap("..2026_02", "..2026_03")
	lc.wait(t, "the second ..data swap")
	wantTools(t, m, "docs__echo")
	wantRefused(t, m, "docs__search", map[string]any{"query": "public"})
	rl.wait(t, "reader")
}

// Revoking a tool while a call to it is running does not cut the call off:
// it was authorised when it started, and it returns its normal answer.
func TestReloadKeepsInFlightCall(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search", "docs__slow"))
	m, lc, rl := reloadMux(t, lab)

	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := m.Call("docs__slow", map[string]any{"ms": 1500, "tag": "inflight"})
		done <- answer{res, err}
	}()
	lab.WaitStarted(t, "inflight")

	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search"))
	lc.wait(t, "revoking docs__slow")
	rl.wait(t, "reader")
	select {
	case <-done:
		t.Fatal("the slow call ended before the revoke took effect; the test proves nothing")
	default:
	}
	wantTools(t, m, "docs__search")
	wantRefused(t, m, "docs__slow", map[string]any{"ms": 0, "tag": "after"})

	got := <-done // bounded by m.Call's own ts.Wait
	if got.err != nil {
		t.Fatalf("the in-flight call failed: %v", got.err)
	}
	if got.res.IsError || ts.Text(got.res) != "slept 1500 tag=inflight" {
		t.Fatalf("the in-flight call: isError=%v text=%q", got.res.IsError, ts.Text(got.res))
	}
	m.Log.WaitLine(t, "the in-flight call's audit", ts.Msg("call", "tool", "docs__slow", "decision", "allowed", "outcome", "ok"))
	if _, err := os.Stat(filepath.Join(lab.Started, "after")); err == nil {
		t.Error("the refused call reached the child")
	}
}

// reader is told of changes to what it can see, and only of those: changes
// to other identities' files, and changes to its own rules that leave its
// list as it was, make no notification. Each quiet change is followed by a
// change reader must hear of, and the first notification it then gets must
// already show that change.
func TestReloadNotifiesOnlyAffectedIdentity(t *testing.T) {
	t.Parallel()
	lab := reloadLab(t)
	lab.WritePolicy(t, "reader", ts.AllowOnly("docs__search"))
	lab.WritePolicy(t, "admin", `allow = ["docs__*"]`)
	m, lc, rl := reloadMux(t, lab)
	wantTools(t, m, "docs__search")

	readerSees := []string{"docs__search"}
	for _, c := range []struct {
		name    string
		change  func(t *testing.T)
		changed string // the identity the quiet change reloads
	}{
		{"admin loses tools", func(t *testing.T) { lab.WritePolicy(t, "admin", ts.AllowOnly("docs__search")) }, "admin"},
		{"admin gains tools", func(t *testing.T) { lab.WritePolicy(t, "admin", `allow = ["*"]`) }, "admin"},
		{"a new identity", func(t *testing.T) { lab.WritePolicy(t, "ops", `allow = ["*"]`) }, "ops"},
		{"an identity removed", func(t *testing.T) {
			if err := os.Remove(filepath.Join(lab.PolicyDir, "ops.toml")); err != nil {
				t.Fatal(err)
			}
		}, "ops"},
		{"reader's rules change, its list does not", func(t *testing.T) {
			lab.WritePolicy(t, "reader", ts.AllowOnly(append([]string{"nothing__matches"}, readerSees...)...))
		}, "reader"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.change(t)
			rl.wait(t, c.changed)
			// A round trip gives a notification sent by mistake, which
			// would have been queued as the reload was logged, time to
			// arrive.
			wantTools(t, m, readerSees...)
			lc.none(t, c.name)

			// Now a change reader must hear of: toggle docs__echo.
			if slices.Contains(readerSees, "docs__echo") {
				readerSees = []string{"docs__search"}
			} else {
				readerSees = []string{"docs__search", "docs__echo"}
			}
			lab.WritePolicy(t, "reader", ts.AllowOnly(readerSees...))
			lc.wait(t, "reader's own change")
			wantTools(t, m, readerSees...)
			rl.wait(t, "reader")
		})
	}
}
