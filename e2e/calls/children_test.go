package calls

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

func crashLab(t *testing.T, extra string) *ts.Lab {
	lab := ts.NewLab(t, `call_timeout = "30s"`,
		ts.Server{Alias: "docs", ReadOnly: []string{"search"}, Extra: extra},
		ts.Server{Alias: "tickets", ReadOnly: []string{"search"}},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	return lab
}

// A read-only call whose child is killed under it is re-run once on the
// restarted child, and the caller gets the retry's answer.
func TestChildKilledDuringReadOnlyCallIsRetried(t *testing.T) {
	t.Parallel()
	lab := crashLab(t, "")
	m := ts.StartMux(t, lab)
	before := ts.ChildPid(t, m, "docs")

	done := make(chan struct {
		text    string
		isError bool
	}, 1)
	go func() {
		res, err := m.Call("docs__slow", map[string]any{"ms": 1500, "tag": "ro"})
		if err != nil {
			t.Errorf("slow: %v", err)
			done <- struct {
				text    string
				isError bool
			}{}
			return
		}
		done <- struct {
			text    string
			isError bool
		}{ts.Text(res), res.IsError}
	}()
	lab.WaitStarted(t, "ro")
	if err := os.Remove(filepath.Join(lab.Started, "ro")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(before, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.isError || got.text != "slept 1500 tag=ro" {
		t.Fatalf("after the crash: isError=%v text=%q", got.isError, got.text)
	}
	// The retry really ran on a new process.
	if _, err := os.Stat(filepath.Join(lab.Started, "ro")); err != nil {
		t.Errorf("the retry did not reach the restarted child: %v", err)
	}
	ts.Audit(m, t, "docs__slow", "allowed")
	if line := m.Log.WaitLine(t, "retried audit", ts.Msg("call", "tool", "docs__slow", "outcome", "retried")); line == nil {
		t.Fatal("no retried outcome")
	}
	if after := ts.ChildPid(t, m, "docs"); after == before {
		t.Errorf("child pid %d unchanged after SIGKILL", after)
	}
}

// A write whose child is killed under it is not replayed: the side-effect
// file proves it ran exactly once, and the caller is told it may or may not
// have taken effect.
func TestChildKilledDuringWriteIsNotReplayed(t *testing.T) {
	t.Parallel()
	lab := crashLab(t, "")
	m := ts.StartMux(t, lab)
	pid := ts.ChildPid(t, m, "docs")

	type answer struct {
		text    string
		isError bool
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := m.Call("docs__append_note", map[string]any{"text": "one", "delay_ms": 60000})
		if err != nil {
			done <- answer{err: err}
			return
		}
		done <- answer{ts.Text(res), res.IsError, nil}
	}()
	ts.WaitFor(t, "the write's side effect", func() bool { return lab.NotesOf(t, "docs") == "one\n" })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if !got.isError || !strings.Contains(got.text, "may or may not have taken effect") || !strings.Contains(got.text, "not retried") {
		t.Fatalf("isError=%v text=%q", got.isError, got.text)
	}
	m.Log.WaitLine(t, "interrupted audit", ts.Msg("call", "tool", "docs__append_note", "outcome", "interrupted"))
	// The restarted child works, and the write still ran only once.
	if got := ts.Text(m.MustCall("docs__search", map[string]any{"query": "public"})); got != "docs: public evidence" {
		t.Errorf("after restart: %q", got)
	}
	if notes := lab.NotesOf(t, "docs"); notes != "one\n" {
		t.Errorf("notes = %q, want exactly one write", notes)
	}
}

// An exit is noticed when it happens, not at the next call: the child is
// restarted with a fresh initialize before anyone calls it.
func TestExitNoticedWithoutACall(t *testing.T) {
	t.Parallel()
	lab := crashLab(t, "")
	m := ts.StartMux(t, lab)
	pid := ts.ChildPid(t, m, "docs")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.Log.WaitLine(t, "exit noticed", ts.Msg("server went away; restarting", "server", "docs"))
	first := m.Log.WaitLine(t, "first ready", ts.Msg("server ready", "server", "docs"))["pid"]
	m.Log.WaitLine(t, "second ready", func(l map[string]any) bool {
		return ts.Msg("server ready", "server", "docs")(l) && l["pid"] != first
	})
}
