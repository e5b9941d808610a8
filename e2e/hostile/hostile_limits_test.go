package hostile

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Hostile children against mcpmux's limits: notification floods, a child
// that answers every other call, a grandchild holding stdout after its
// parent exits, lines and catalogs over their limits. Each test checks what
// the caller sees and that mcpmux goes on serving, its other children too.

// withLab adds a labserver "lab" to a hostile lab's config, to show that
// calls to another child are not affected.
func withLab(t *testing.T, muxLines, tools string, env map[string]string) *ts.Lab {
	t.Helper()
	lab := ts.HostileLab(t, muxLines, tools, env)
	lab.AddServer(t, ts.Server{Alias: "lab", ReadOnly: []string{"echo"}})
	return lab
}

// labEchoes makes n concurrent calls to the labserver and fails on any
// answer that is not its own.
func labEchoes(t *testing.T, m *ts.Mux, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			msg := fmt.Sprintf("other-%d", i)
			res, err := m.Call("lab__echo", map[string]any{"message": msg})
			if err != nil {
				t.Errorf("lab__echo %d: %v", i, err)
				return
			}
			if res.IsError || ts.Text(res) != "lab: "+msg {
				t.Errorf("lab__echo %d: isError=%v text=%q", i, res.IsError, ts.Text(res))
			}
		})
	}
	wg.Wait()
}

// A child that floods notifications of each kind, for good, as fast as its
// stdout takes them: mcpmux keeps answering it and the other child, its
// memory stays bounded, and a tools/list_changed flood costs fewer catalog
// re-reads than 1% of the notifications.
func TestHostileNotificationFlood(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"message", "progress", "list_changed"} {
		t.Run(kind, func(t *testing.T) {
			tools := `[` + hostileEcho + `,{"name":"stats","inputSchema":{"type":"object"}}]`
			lab := withLab(t, `call_timeout = "10s"`, tools, map[string]string{"HOSTILE_FLOOD": kind})
			m := ts.StartMux(t, lab)
			if names := m.ToolNames(); !ts.Contains(names, "lab__echo") || !ts.Contains(names, "h__echo") {
				t.Fatalf("tools %q", names)
			}
			want := len(m.ToolNames())
			childSaw(t, m, "hostile flooded 10000")
			var begun floodStats
			if kind == "list_changed" {
				begun = stats(t, m)
			}
			_, before := ts.Memory(t, m.Cmd.Process.Pid)
			for i := range 20 {
				res := m.MustCall("h__echo", map[string]any{"i": i})
				if res.IsError || ts.Text(res) != fmt.Sprintf(`{"i":%d}`, i) {
					t.Fatalf("h__echo during the flood: isError=%v text=%q", res.IsError, ts.Text(res))
				}
			}
			labEchoes(t, m, 50)
			// 90,000 more notifications, each read and (for the message
			// kind) logged under the race detector, on a machine the other
			// packages' tests share: a bound for slow work, not a time limit.
			m.Log.WaitLineWithin(t, 4*ts.Wait, "child stderr hostile flooded 100000",
				ts.Msg("server stderr", "server", "h", "stderr", "hostile flooded 100000"))
			if kind == "list_changed" {
				end := stats(t, m)
				reads, sent := end.ToolsList-begun.ToolsList, end.Flooded-begun.Flooded
				t.Logf("%d tools/list re-reads for %d list_changed", reads, sent)
				if reads*100 >= sent {
					t.Errorf("%d tools/list re-reads for %d list_changed, want fewer than 1%%", reads, sent)
				}
				// Once per child's start at most, never for a re-read.
				changes := m.Log.Lines(ts.Msg("catalog changed"))
				if len(changes) > 2 || changes[len(changes)-1]["tools"] != float64(want) {
					t.Errorf("catalog changed %d times (%v); the tools never did after the start", len(changes), changes)
				}
			}
			rss, peak := ts.Memory(t, m.Cmd.Process.Pid)
			t.Logf("mcpmux VmHWM %d MiB after 10,000 notifications, VmRSS %d MiB and VmHWM %d MiB after 100,000", before>>20, rss>>20, peak>>20)
			if limit := ts.RSSLimitMiB(t, 64); peak>>20 > limit {
				t.Errorf("mcpmux peaked at %d MiB during the flood, over %d MiB", peak>>20, limit)
			}
			stillUp(t, m)
		})
	}
}

// A burst of 20,000 tools/list_changed, the last one for a real change:
// the burst folds into fewer re-reads than 1% of it, and the change is
// listed.
func TestHostileListChangedBurstCoalesces(t *testing.T) {
	t.Parallel()
	tools := `[` + hostileEcho + `,{"name":"flood","inputSchema":{"type":"object"}},{"name":"stats","inputSchema":{"type":"object"}}]`
	lab := ts.HostileLab(t, "", tools, nil)
	m := ts.StartMux(t, lab)
	const sent = 20000
	begun := stats(t, m)
	res := m.MustCall("h__flood", map[string]any{"method": "notifications/tools/list_changed", "count": sent, "add": "late"})
	if res.IsError || ts.Text(res) != fmt.Sprintf("flooded %d", sent) {
		t.Fatalf("flood: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	m.WaitTools("lists h__late", func(names []string) bool { return ts.Contains(names, "h__late") })
	reads := stats(t, m).ToolsList - begun.ToolsList
	t.Logf("%d list_changed: %d re-reads", sent, reads)
	if reads < 1 || reads*100 >= sent {
		t.Errorf("%d re-reads for %d list_changed, want at least one and fewer than 1%%", reads, sent)
	}
	stillUp(t, m)
}

// floodStats is what the hostile child's stats tool counts.
type floodStats struct {
	ToolsList int `json:"tools_list"` // tools/list requests it got
	Flooded   int `json:"flooded"`    // notifications HOSTILE_FLOOD sent
}

func stats(t *testing.T, m *ts.Mux) floodStats {
	t.Helper()
	res := m.MustCall("h__stats", nil)
	var st floodStats
	if err := json.Unmarshal([]byte(ts.Text(res)), &st); res.IsError || err != nil {
		t.Fatalf("stats: isError=%v text=%q: %v", res.IsError, ts.Text(res), err)
	}
	return st
}

// A child that answers only every other call: the answered calls get their
// own answers, the others time out at call_timeout with a message saying
// so, and the child is told to cancel each of them; the child is not
// restarted and the other child is not affected.
func TestHostileAnswersEveryOtherCall(t *testing.T) {
	t.Parallel()
	lab := withLab(t, `call_timeout = "1s"`, `[`+hostileEcho+`]`, map[string]string{"HOSTILE_SKIP": "1"})
	m := ts.StartMux(t, lab)
	const calls = 10
	type answer struct {
		i       int
		text    string
		isError bool
	}
	answers := make(chan answer, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			res, err := m.Call("h__echo", map[string]any{"n": i})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			answers <- answer{i, ts.Text(res), res.IsError}
		})
	}
	wg.Wait()
	close(answers)
	ok, timedOut := 0, 0
	for a := range answers {
		switch {
		case !a.isError && a.text == fmt.Sprintf(`{"n":%d}`, a.i):
			ok++
		case a.isError && a.text == "the call to h__echo timed out after 1s; server h was told to cancel it":
			timedOut++
		default:
			t.Errorf("call %d: isError=%v text=%q", a.i, a.isError, a.text)
		}
	}
	if ok != calls/2 || timedOut != calls/2 {
		t.Errorf("%d answered and %d timed out, want %d each", ok, timedOut, calls/2)
	}
	// Every call the child skipped was cancelled, under its own id.
	skipped := m.Log.WaitLines(t, "the calls the child skipped", calls/2, func(l map[string]any) bool {
		s, _ := l["stderr"].(string)
		return l["message"] == "server stderr" && strings.HasPrefix(s, "hostile skipped ")
	})
	if len(skipped) != calls/2 {
		t.Fatalf("the child skipped %d calls, want %d", len(skipped), calls/2)
	}
	for _, l := range skipped {
		id := strings.TrimPrefix(l["stderr"].(string), "hostile skipped ")
		childSaw(t, m, "hostile cancelled "+id)
	}
	// A call's audit line is written before its answer, but the log is read
	// from another pipe than the answers.
	timeouts := func() int { return len(m.Log.Lines(ts.Msg("call", "tool", "h__echo", "outcome", "timeout"))) }
	ts.WaitFor(t, "an audit line for each timed-out call", func() bool { return timeouts() >= calls/2 })
	if n := timeouts(); n != calls/2 {
		t.Errorf("%d audit lines with outcome timeout, want %d", n, calls/2)
	}
	labEchoes(t, m, 20)
	if lines := m.Log.Lines(ts.Msg("server went away; restarting")); len(lines) != 0 {
		t.Errorf("a child was restarted: %v", lines)
	}
}

// A child that forks a grandchild holding its stdout, then exits: its
// answer arrives, mcpmux notices the exit itself (not a stdout that never
// ends), restarts the child, and the grandchild dies with the group.
func TestHostileGrandchildHoldsStdout(t *testing.T) {
	t.Parallel()
	lab := ts.HostileLab(t, `call_timeout = "10s"`, `[`+hostileEcho+`,{"name":"fork_exit","inputSchema":{"type":"object"}}]`, nil)
	m := ts.StartMux(t, lab)
	first := m.Log.WaitLine(t, "first ready", ts.Msg("server ready", "server", "h"))["pid"]
	res := m.MustCall("h__fork_exit", nil)
	grandchild, err := strconv.Atoi(ts.Text(res))
	if res.IsError || err != nil {
		t.Fatalf("fork_exit: isError=%v text=%q", res.IsError, ts.Text(res))
	}
	gone := m.Log.WaitLine(t, "exit noticed", ts.Msg("server went away; restarting", "server", "h"))
	if gone["why"] != "exit status 0" {
		t.Errorf("session lost because %q, want the exit", gone["why"])
	}
	ts.WaitFor(t, "the grandchild to be killed", func() bool { return !ts.Alive(grandchild) })
	m.Log.WaitLine(t, "restarted", func(l map[string]any) bool {
		return ts.Msg("server ready", "server", "h")(l) && l["pid"] != first
	})
	stillUp(t, m)
}

// A child line over max_message_bytes costs only that line: an answer's
// call gets an isError saying the answer was dropped (at once, even when
// the line never ends), a notification is only dropped, each is logged
// naming the limit, the child keeps its session (a call in flight to it
// when the line comes gets its own answer), calls to the other child go
// on, and mcpmux's memory stays within a few times the limit, whatever the
// child offers.
func TestHostileOversizedLine(t *testing.T) {
	t.Parallel()
	dropped := func(tool string) string {
		return "the server's response to " + tool + " exceeded max_message_bytes (16MiB) and was dropped; the call reached the server"
	}
	for _, c := range []struct {
		tool   string
		args   map[string]any
		want   string // the call's text: an isError unless "ok"
		answer bool   // the line dropped was the call's answer
	}{
		{"bigline", map[string]any{"mb": 20}, dropped("bigline"), true},
		{"huge", nil, dropped("huge"), true}, // 512 MiB without a newline
		{"bignote", map[string]any{"mb": 20}, "ok", false},
	} {
		t.Run(c.tool, func(t *testing.T) {
			tools := `[` + hostileEcho + `,{"name":"bigline","inputSchema":{"type":"object"}},{"name":"huge","inputSchema":{"type":"object"}},` +
				`{"name":"bignote","inputSchema":{"type":"object"}},{"name":"held","inputSchema":{"type":"object"}}]`
			lab := withLab(t, `call_timeout = "20s"`, tools, map[string]string{"HOSTILE_HUGE_MB": "512"})
			m := ts.StartMux(t, lab)
			pid, _ := m.Log.WaitLine(t, "ready", ts.Msg("server ready", "server", "h"))["pid"].(float64)
			m.MustCall("h__echo", nil)
			labEchoes(t, m, 5)
			before, _ := ts.Memory(t, m.Cmd.Process.Pid)

			// A call to the same child, in flight until the big answer is out.
			held := make(chan string, 1)
			if c.tool == "bigline" {
				go func() {
					res, err := m.Call("h__held", nil)
					switch {
					case err != nil:
						held <- err.Error()
					case res.IsError:
						held <- "isError: " + ts.Text(res)
					default:
						held <- ts.Text(res)
					}
				}()
				childSaw(t, m, "hostile call held")
			}
			others := make(chan struct{})
			go func() {
				defer close(others)
				labEchoes(t, m, 20)
			}()
			res := m.MustCall("h__"+c.tool, c.args)
			<-others
			if res.IsError != (c.want != "ok") || ts.Text(res) != c.want {
				t.Errorf("%s: isError=%v text=%.300q, want %q", c.tool, res.IsError, ts.Text(res), c.want)
			}
			if c.tool == "bigline" {
				if got := <-held; got != "held" {
					t.Errorf("the call in flight to the same child got %q, want its answer", got)
				}
			}
			l := m.Log.WaitLine(t, "the limit logged", ts.Msg("server sent a message over max_message_bytes; it was dropped", "server", "h"))
			if l["max_message_bytes"] != float64(16<<20) || l["answer"] != c.answer || l["pid"] != pid {
				t.Errorf("logged %v, want max_message_bytes 16MiB, answer %v, pid %v", l, c.answer, pid)
			}
			if c.tool == "huge" {
				// All of it read and dropped: the child is not stuck on a
				// full pipe, and the memory below is after the whole line.
				childSaw(t, m, "hostile huge: done writing")
			}
			rss, peak := ts.Memory(t, m.Cmd.Process.Pid)
			t.Logf("%s: mcpmux VmRSS %d MiB before, %d MiB after, peak %d MiB", c.tool, before>>20, rss>>20, peak>>20)
			// mcp-go joins a line's fragments, so a line at the limit is
			// held about twice, and decoded once more.
			if limit := before>>20 + ts.RSSLimitMiB(t, 5*16); peak>>20 > limit {
				t.Errorf("mcpmux peaked at %d MiB, over %d MiB", peak>>20, limit)
			}
			labEchoes(t, m, 5)
			if c.tool != "huge" { // which holds the child's stdout for good
				stillUp(t, m)
			}
			if lines := m.Log.Lines(ts.Msg("server went away; restarting")); len(lines) != 0 || !ts.Alive(int(pid)) {
				t.Errorf("the child's session was ended (alive: %v): %v", ts.Alive(int(pid)), lines)
			}
		})
	}
}

// A catalog over max_catalog_pages or max_catalog_bytes at start: the child
// does not start, each attempt fails with an error naming the limit and is
// retried with backoff, a call gets that error, and the other child serves.
func TestHostileCatalogOverLimitAtStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		env  map[string]string
		err  string
	}{
		{"pages", map[string]string{"HOSTILE_PAGES": "6"}, "tools/list: the tool list has more than max_catalog_pages (5) pages"},
		{"bytes", map[string]string{"HOSTILE_PAGES": "5", "HOSTILE_PAGE_PAD": "5000"}, "tools/list: the tool list is larger than max_catalog_bytes (16KiB) after 5 pages"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			limits := "call_timeout = \"10s\"\n\n[limits]\nmax_catalog_pages = 5\nmax_catalog_bytes = \"16KiB\""
			lab := ts.HostileLab(t, limits, `[`+hostileEcho+`]`, c.env)
			lab.AddServer(t, ts.Server{Alias: "lab", ReadOnly: []string{"echo"}})
			m := ts.StartMux(t, lab)
			for attempt := 1; attempt <= 2; attempt++ {
				l := m.Log.WaitLine(t, fmt.Sprintf("failed start %d", attempt), func(l map[string]any) bool {
					return ts.Msg("server failed to start", "server", "h", "attempt", strconv.Itoa(attempt))(l)
				})
				if e, _ := l["error"].(string); e != "server h: "+c.err {
					t.Errorf("attempt %d failed with %q, want %q", attempt, e, "server h: "+c.err)
				}
			}
			if names := m.ToolNames(); ts.HasPrefix(names, "h__") || !ts.Contains(names, "lab__echo") {
				t.Errorf("tools %q: want lab's and none of h's", names)
			}
			labEchoes(t, m, 10)
		})
	}
}

// A catalog that grows over its limit on a re-read: the re-read fails with
// an error naming the limit, the previous catalog stays listed and
// callable, and the child keeps its session.
func TestHostileCatalogOverLimitOnReread(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		args map[string]any
		err  string
	}{
		{"pages", map[string]any{"pages": 6}, "tools/list: the tool list has more than max_catalog_pages (5) pages"},
		{"bytes", map[string]any{"pages": 5, "pad": 5000}, "tools/list: the tool list is larger than max_catalog_bytes (16KiB) after 5 pages"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			limits := "call_timeout = \"10s\"\n\n[limits]\nmax_catalog_pages = 5\nmax_catalog_bytes = \"16KiB\""
			lab := ts.HostileLab(t, limits, `[`+hostileEcho+`,{"name":"grow","inputSchema":{"type":"object"}}]`,
				map[string]string{"HOSTILE_PAGES": "3"})
			m := ts.StartMux(t, lab)
			before := m.ToolNames()
			if !ts.Contains(before, "h__page3") {
				t.Fatalf("tools %q: want the three pages listed", before)
			}
			if res := m.MustCall("h__grow", c.args); res.IsError {
				t.Fatalf("grow: %s", ts.Text(res))
			}
			l := m.Log.WaitLine(t, "re-read refused", ts.Msg("re-reading the tool list failed; keeping the previous one", "server", "h"))
			if l["error"] != c.err {
				t.Errorf("re-read failed with %q, want %q", l["error"], c.err)
			}
			if after := m.ToolNames(); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("tools %q after the refused re-read, want %q", after, before)
			}
			if res := m.MustCall("h__page2", map[string]any{"still": "here"}); res.IsError || ts.Text(res) != `{"still":"here"}` {
				t.Errorf("h__page2: isError=%v text=%q", res.IsError, ts.Text(res))
			}
			stillUp(t, m)
			if lines := m.Log.Lines(ts.Msg("server went away; restarting")); len(lines) != 0 {
				t.Errorf("the child was restarted: %v", lines)
			}
		})
	}
}
