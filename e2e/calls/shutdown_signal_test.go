package calls

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// A SIGTERM that comes while mcpmux is already stopping, because its stdin
// ended, joins that shutdown rather than killing mcpmux halfway: its
// children are still stopped gracefully, none outlives it, and it exits 0.
// The hostile child stays after its stdin ends until mcpmux's SIGTERM to
// it, so the signal is sure to come while mcpmux is stopping its children.
// (TestHTTPAndStdioTogether's cleanup closes stdin and then sends SIGTERM:
// it once found a child alive after mcpmux, killed by that signal, exited.)
func TestSIGTERMDuringStdinShutdown(t *testing.T) {
	t.Parallel()
	lab := ts.HostileLab(t, "", `[{"name":"echo","inputSchema":{"type":"object"}}]`, map[string]string{"HOSTILE_EOF_REQUEST": "ping"})
	m := ts.StartMux(t, lab)
	ready := m.Log.WaitLine(t, "the child's start", ts.Msg("server ready", "server", "h"))
	pid, ok := ready["pid"].(float64)
	if !ok {
		t.Fatalf("server ready without a pid: %v", ready)
	}
	m.CloseStdin()
	m.Log.WaitLine(t, "the child to see its stdin end", func(l map[string]any) bool {
		return strings.Contains(fmt.Sprint(l["stderr"]), "hostile asked ping at the end of its stdin")
	})
	if err := m.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-m.Exited()
	if err := m.ExitErr(); err != nil {
		t.Errorf("exit: %v, want 0: the signal came during the shutdown stdin's end started", err)
	}
	if ts.Alive(int(pid)) {
		t.Errorf("child %d outlived mcpmux", int(pid))
	}
	m.Log.WaitLine(t, "the stop", ts.Msg("stdin closed; stopping"))
}
