package calls

import (
	"syscall"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// mcpmux writes its log in batches, not a write per line; what it logged
// is all on stderr when it exits: the audit lines of calls answered just
// before a SIGTERM, and the lines of its own stop.
func TestLogWrittenBeforeSIGTERMIsOnStderr(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	const calls = 5
	for range calls {
		m.MustCall("docs__echo", map[string]any{"text": "hi"})
	}
	// Each line is written before its call is answered (call.go), so
	// every one is in mcpmux's log by now, whether on stderr yet or not.
	if err := m.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-m.Exited()
	if err := m.ExitErr(); err != nil {
		t.Errorf("exit: %v", err)
	}
	if got := len(m.Log.Lines(ts.Msg("call", "tool", "docs__echo", "outcome", "ok"))); got != calls {
		t.Errorf("%d audit lines of %d calls on stderr:\n%s", got, calls, m.Log.Text())
	}
	// The last lines mcpmux logs, as it stops its children.
	if len(m.Log.Lines(ts.Msg("signal received; stopping"))) != 1 {
		t.Errorf("no line of the stop on stderr:\n%s", m.Log.Text())
	}
}
