package testsupport

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// Grandchild has alias's child start a grandchild and returns its pid.
func Grandchild(t testing.TB, m *Mux, alias string) int {
	t.Helper()
	var pid int
	if _, err := fmt.Sscan(Text(m.MustCall(alias+"__spawn_grandchild", nil)), &pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// SigkillLeavesNothing checks that pids all run, SIGKILLs mcpmux, and waits
// for every one of them to die with it. A survivor is named by what it runs.
func SigkillLeavesNothing(t testing.TB, m *Mux, pids []int) {
	t.Helper()
	what := map[int]string{}
	for _, pid := range pids {
		if !Alive(pid) {
			t.Fatalf("pid %d not running before the kill", pid)
		}
		what[pid] = fmt.Sprintf("pid %d (%s)", pid, Cmdline(pid))
	}
	if err := m.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-m.Exited()
	for _, pid := range pids {
		WaitFor(t, what[pid]+" to die with mcpmux", func() bool { return !Alive(pid) })
	}
}

// ChildPid asks a child for its own pid (the real server, which mcpmux's
// supervisor forked).
func ChildPid(t testing.TB, m *Mux, alias string) int {
	t.Helper()
	pid, err := strconv.Atoi(Text(m.MustCall(alias+"__whoami", nil)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// Audit waits for the audit line of a call of tool with decision.
func Audit(m *Mux, t testing.TB, tool, decision string) map[string]any {
	t.Helper()
	return m.Log.WaitLine(t, fmt.Sprintf("audit of %s (%s)", tool, decision), Msg("call", "tool", tool, "decision", decision))
}

// WantUnknownTool fails t unless err is the -32602 of an unknown tool name.
func WantUnknownTool(t testing.TB, err error, name string) {
	t.Helper()
	if err == nil {
		t.Fatalf("call %s: want a JSON-RPC error, got a result", name)
	}
	if !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), name) {
		t.Fatalf("call %s: got %q, want -32602 naming the tool", name, err)
	}
}

// AllowOnly is a policy allowing exactly the named tools.
func AllowOnly(names ...string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "allow = [" + strings.Join(q, ", ") + "]\n"
}
