package calls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// A call that runs past call_timeout is answered with isError, and the
// child is told to cancel it.
func TestCallTimeoutCancelsTheChild(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, `call_timeout = "300ms"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	res := m.MustCall("docs__slow", map[string]any{"ms": 60000, "tag": "late"})
	if !res.IsError || !strings.Contains(ts.Text(res), "timed out after 300ms") {
		t.Fatalf("isError=%v text=%q", res.IsError, ts.Text(res))
	}
	m.Log.WaitLine(t, "timeout audit", ts.Msg("call", "tool", "docs__slow", "outcome", "timeout"))
	// The child's handler saw notifications/cancelled and said so on stderr.
	m.Log.WaitLine(t, "child cancelled", ts.Msg("server stderr", "server", "docs", "stderr", "labserver docs slow late cancelled"))
}

// A client that cancels its call has the cancellation passed on.
func TestClientCancellationReachesTheChild(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "docs__slow"
		req.Params.Arguments = map[string]any{"ms": 60000, "tag": "gaveup"}
		_, err := m.Client.CallTool(ctx, req)
		errc <- err
	}()
	lab.WaitStarted(t, "gaveup")
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled call returned a result")
	}
	m.Log.WaitLine(t, "child cancelled", ts.Msg("server stderr", "server", "docs", "stderr", "labserver docs slow gaveup cancelled"))
	m.Log.WaitLine(t, "cancelled audit", ts.Msg("call", "tool", "docs__slow", "outcome", "cancelled"))
}

// A child that is gone longer than startup_timeout answers "unavailable",
// has its tools withdrawn with list_changed, and gets them back when it
// returns. The other child serves throughout.
func TestUnavailableChildIsWithdrawnAndComesBack(t *testing.T) {
	// Not parallel: its child's startup_timeout of 1s, which bounds the
	// start it lets fail, must also hold for its first start.
	blocker := filepath.Join(t.TempDir(), "fail-init")
	lab := ts.NewLab(t, `call_timeout = "30s"`,
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_FAIL_INIT_FILE": blocker}, Extra: `startup_timeout = "1s"`},
		ts.Server{Alias: "tickets"},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	pid := ts.ChildPid(t, m, "docs")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m.DrainNotifications()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Once mcpmux has seen the exit (a call sent before would be
	// interrupted instead), the tools are still listed while it restarts;
	// the call waits startup_timeout, then says why.
	m.Log.WaitLine(t, "the exit noticed", ts.Msg("server went away; restarting", "server", "docs"))
	res := m.MustCall("docs__search", map[string]any{"query": "public"})
	if !res.IsError || !strings.HasPrefix(ts.Text(res), "server docs is unavailable: ") {
		t.Fatalf("isError=%v text=%q", res.IsError, ts.Text(res))
	}
	m.Log.WaitLine(t, "unavailable audit", ts.Msg("call", "tool", "docs__search", "outcome", "unavailable"))
	if got := ts.Text(m.MustCall("tickets__search", map[string]any{"query": "public"})); got != "tickets: public evidence" {
		t.Errorf("tickets while docs is down: %q", got)
	}

	m.WaitTools("lost the docs tools", func(names []string) bool { return !ts.Contains(names, "docs__search") })
	_, err := m.Call("docs__search", map[string]any{"query": "public"})
	ts.WantUnknownTool(t, err, "docs__search")

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	m.WaitTools("got the docs tools back", func(names []string) bool { return ts.Contains(names, "docs__search") })
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("after return: %q", got)
	}
}

// A child that cannot start at all does not stop the others.
func TestChildThatCannotStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		srv  ts.Server
	}{
		{"missing command", ts.Server{Alias: "broken", Command: "/nonexistent/mcp-server"}},
		{"exits at start", ts.Server{Alias: "broken", Env: map[string]string{"LAB_FAIL_INIT": "1"}}},
		{"silent initialize", ts.Server{Alias: "broken", Env: map[string]string{"LAB_SILENT": "1"}, Extra: `startup_timeout = "500ms"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lab := ts.NewLab(t, "", ts.Server{Alias: "docs"}, c.srv)
			lab.WritePolicy(t, "reader", `allow = ["*"]`)
			m := ts.StartMux(t, lab)
			names := m.ToolNames()
			if len(names) == 0 || !strings.HasPrefix(names[0], "docs__") {
				t.Fatalf("tools = %v", names)
			}
			for _, n := range names {
				if strings.HasPrefix(n, "broken__") {
					t.Errorf("%s listed", n)
				}
			}
			m.Log.WaitLine(t, "start failure", ts.Msg("server failed to start", "server", "broken"))
			// It keeps being retried with backoff.
			m.Log.WaitLine(t, "second attempt", func(l map[string]any) bool {
				return ts.Msg("server failed to start", "server", "broken")(l) && l["attempt"] == float64(2)
			})
			if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
				t.Errorf("docs: %q", got)
			}
		})
	}
}

// Nothing a child started outlives mcpmux, even when mcpmux is killed with
// SIGKILL and cannot clean up.
func TestNoOrphansAfterSIGKILL(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	var pids []int
	for _, alias := range []string{"docs", "tickets"} {
		pids = append(pids, ts.ChildPid(t, m, alias), ts.Grandchild(t, m, alias))
	}
	pids = append(pids, m.Log.ChildPids()...) // the children as mcpmux reported them
	ts.SigkillLeavesNothing(t, m, pids)
}

// Children that exit as soon as their stdin ends (procpeek, like most
// servers) exit on mcpmux's death at about the moment the supervisor is
// told of it; their grandchildren still die with them.
func TestNoOrphansWhenChildrenExitOnStdinEOF(t *testing.T) {
	t.Parallel()
	peek := ts.ProcpeekBinary(t)
	aliases := []string{"a", "b", "c", "d", "e"}
	var servers []ts.Server
	for _, a := range aliases {
		servers = append(servers, ts.Server{Alias: a, Command: peek})
	}
	lab := ts.NewLab(t, "", servers...)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	var pids []int
	for _, alias := range aliases {
		pids = append(pids, ts.Grandchild(t, m, alias))
	}
	pids = append(pids, m.Log.ChildPids()...) // the children as mcpmux reported them
	ts.SigkillLeavesNothing(t, m, pids)
}

// SIGTERM stops mcpmux and every child gracefully.
func TestSIGTERMStopsChildren(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	pids := []int{ts.ChildPid(t, m, "docs"), ts.ChildPid(t, m, "tickets")}
	if err := m.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-m.Exited()
	if err := m.ExitErr(); err != nil {
		t.Errorf("exit: %v", err)
	}
	for _, pid := range pids {
		if ts.Alive(pid) {
			t.Errorf("child %d still running after mcpmux exited", pid)
		}
	}
	m.Log.WaitLine(t, "signal log", ts.Msg("signal received; stopping"))
}

// The child's own list_changed makes mcpmux read its catalog again and tell
// upstream.
func TestChildListChangedIsRelayed(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	has := func(name string) bool {
		for _, n := range m.ToolNames() {
			if n == name {
				return true
			}
		}
		return false
	}
	if has("docs__extra") {
		t.Fatal("extra listed before it exists")
	}
	m.MustCall("docs__notify_changed", nil)
	m.WaitTools("gained docs__extra", func(names []string) bool { return ts.Contains(names, "docs__extra") })
}

// A schema with oneOf, minProperties, $schema and a top-level description
// is advertised byte for byte as the child wrote it, and enforced.
func TestRawSchemaSurvives(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	var pick json.RawMessage
	for _, raw := range m.RawTools() {
		var head struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		if head.Name == "docs__pick" {
			pick = head.InputSchema
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(pick, &schema); err != nil {
		t.Fatal(err)
	}
	for _, kw := range []string{"oneOf", "minProperties", "$schema", "description", "additionalProperties"} {
		if _, ok := schema[kw]; !ok {
			t.Errorf("keyword %s lost: %s", kw, pick)
		}
	}
	cases := []struct {
		args    map[string]any
		isError bool
		text    string
	}{
		{map[string]any{"id": 7}, false, "picked 7"},
		{map[string]any{"name": "x"}, false, "picked x"},
		{map[string]any{}, true, "(root)"},
		{map[string]any{"id": 1, "name": "x"}, true, "(root)"},
		{map[string]any{"id": "seven"}, true, "/id"},
		{map[string]any{"other": true}, true, "other"},
	}
	for _, c := range cases {
		res := m.MustCall("docs__pick", c.args)
		if res.IsError != c.isError || !strings.Contains(ts.Text(res), c.text) {
			t.Errorf("pick %v: isError=%v text=%q", c.args, res.IsError, ts.Text(res))
		}
	}
}

// A child that lists its tools in pages is read to the end; upstream pages
// with opaque cursors keep catalog order.
func TestPaging(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "page_size = 3",
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_PAGE_SIZE": "2"}},
		ts.Server{Alias: "tickets"},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()

	first := m.RawRequest(ctx, "tools/list", nil, true)
	var page struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(first, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Tools) != 3 || page.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q", len(page.Tools), page.NextCursor)
	}
	names := m.ToolNames()
	if len(names) != 18 {
		t.Fatalf("%d tools over all pages, want 18 (9 per child): %v", len(names), names)
	}
	for i, n := range names {
		if i < 9 && !strings.HasPrefix(n, "docs__") || i >= 9 && !strings.HasPrefix(n, "tickets__") {
			t.Fatalf("order: %v", names)
		}
	}
	// Byte for byte the same every time.
	a, _ := json.Marshal(m.RawTools())
	b, _ := json.Marshal(m.RawTools())
	if string(a) != string(b) {
		t.Error("two listings differ")
	}
	for _, bad := range []string{"not-a-cursor", "bWNwbXV4Oi0x"} {
		_, err := m.RawRequestErr(ctx, "tools/list", map[string]any{"cursor": bad}, false)
		if !errors.Is(err, mcp.ErrInvalidParams) {
			t.Errorf("cursor %q: got %v, want -32602", bad, err)
		}
	}
}

// Many calls at once, to both children, slow and fast, reads and writes:
// every answer reaches its own caller, and a slow call on one child does not
// hold up another child.
func TestConcurrentMixedCalls(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)

	// A call that blocks docs for the whole test.
	blocked := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "docs__slow"
		req.Params.Arguments = map[string]any{"ms": 60000, "tag": "hog"}
		_, err := m.Client.CallTool(ctx, req)
		blocked <- err
	}()
	lab.WaitStarted(t, "hog")

	var wg sync.WaitGroup
	var mu sync.Mutex
	notes := 0
	for i := range 200 {
		wg.Go(func() {
			alias := []string{"docs", "tickets"}[i%2]
			var name, want string
			var args map[string]any
			switch i % 4 {
			case 0, 1:
				name, args, want = alias+"__echo", map[string]any{"message": fmt.Sprint("m", i)}, fmt.Sprintf("%s: m%d", alias, i)
			case 2:
				name, args, want = alias+"__slow", map[string]any{"ms": 20, "tag": fmt.Sprint("s", i)}, fmt.Sprintf("slept 20 tag=s%d", i)
			case 3:
				name, args, want = alias+"__append_note", map[string]any{"text": fmt.Sprint("n", i)}, "noted"
				mu.Lock()
				notes++
				mu.Unlock()
			}
			res, err := m.Call(name, args)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if got := ts.Text(res); got != want || res.IsError {
				t.Errorf("call %d (%s): got %q, want %q", i, name, got, want)
			}
		})
	}
	wg.Wait()
	lines := strings.Count(lab.NotesOf(t, "docs"), "\n") + strings.Count(lab.NotesOf(t, "tickets"), "\n")
	if lines != notes {
		t.Errorf("%d notes written, want %d", lines, notes)
	}
	cancel()
	<-blocked
	// The cancellation travels on its own; see it arrive before the test
	// closes mcpmux's stdin, which would otherwise wait for the hog.
	m.Log.WaitLine(t, "hog cancelled", ts.Msg("server stderr", "server", "docs", "stderr", "labserver docs slow hog cancelled"))
}

// initialize and the first tools/list wait for every child to be ready, so
// that mcpmux declares what the children support and the client sees the
// whole catalog at once, even when a child is slow to start.
func TestFirstListWaitsForChildren(t *testing.T) {
	t.Parallel()
	// Only the slow child offers prompts.
	lab := ts.NewLab(t, "",
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_START_DELAY_MS": "3000", "LAB_FIDELITY": "1"}},
		ts.Server{Alias: "tickets"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	if caps := m.Client.GetServerCapabilities(); caps.Prompts == nil {
		t.Errorf("initialize declared %+v, without the slow child's prompts", caps)
	}
	start := time.Now()
	names := m.ToolNames()
	if !ts.Contains(names, "docs__search") || !ts.Contains(names, "tickets__search") {
		t.Fatalf("first list %q lacks a child's tools (after %v)", names, time.Since(start))
	}
}

// A child whose pipe breaks under a call, while its process lives on or its
// exit is not yet seen, has not answered: the call is reported interrupted
// (and the child restarted), never as the child's own refusal. The call's
// timeout falls inside the time mcpmux would otherwise wait for the exit.
func TestBrokenPipeIsNotTheChildsAnswer(t *testing.T) {
	t.Parallel()
	_, labBin := ts.Binaries(t)
	lab := ts.NewLab(t, `call_timeout = "2500ms"`, ts.Server{
		Alias:   "docs",
		Command: "/bin/sh",
		// labserver is killed 2s after it starts; the shell then closes its
		// stdout and lives on.
		Args: []string{"-c", "timeout -s KILL 2 " + labBin + "; exec >&-; exec sleep 30"},
		Env:  map[string]string{"LAB_RECORDS_DIR": t.TempDir()},
	})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	// record is a write: it is not retried.
	res := m.MustCall("docs__record", map[string]any{"id": "w1", "ms": 10000})
	text := ts.Text(res)
	if !res.IsError || !strings.Contains(text, "server docs went away during the call to docs__record") {
		t.Fatalf("isError=%v text=%q, want the call reported interrupted\n%s", res.IsError, text, m.Log.Text())
	}
	m.Log.WaitLine(t, "interrupted audit", ts.Msg("call", "tool", "docs__record", "outcome", "interrupted"))
	m.Log.WaitLine(t, "restart", ts.Msg("server went away; restarting", "server", "docs"))
}

// A read-only call whose child dies under it, and whose retry finds the
// child still down, says that it may have run once.
func TestRetryThatFindsTheChildDownSaysItRan(t *testing.T) {
	// Not parallel: its child's startup_timeout of 1s, which bounds the
	// start it lets fail, must also hold for its first start.
	blocker := filepath.Join(t.TempDir(), "fail-init")
	lab := ts.NewLab(t, `call_timeout = "30s"`,
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_FAIL_INIT_FILE": blocker}, Extra: `startup_timeout = "1s"`})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	pid := ts.ChildPid(t, m, "docs")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := m.Call("docs__slow", map[string]any{"ms": 60000, "tag": "ran-once"})
		done <- res
	}()
	lab.WaitStarted(t, "ran-once")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || !res.IsError {
		t.Fatalf("result %+v, want an error result", res)
	}
	text := ts.Text(res)
	if !strings.HasPrefix(text, "server docs went away during the call to docs__slow (") ||
		!strings.Contains(text, "it was to be retried once, but server docs is unavailable: ") {
		t.Fatalf("text %q, want it to say the call went away and its retry found the server down", text)
	}
	m.Log.WaitLine(t, "interrupted audit", ts.Msg("call", "tool", "docs__slow", "outcome", "interrupted"))
}
