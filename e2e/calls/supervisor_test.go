package calls

import (
	"slices"
	"testing"

	"github.com/mcpmux/mcpmux/internal/childproc"
	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// One supervisor process, mcpmux's only child, forks every child server;
// a SIGKILLed mcpmux takes it, every child and every grandchild down.
func TestOneSupervisorForAllChildren(t *testing.T) {
	t.Parallel()
	aliases := []string{"a", "b", "c"}
	var servers []ts.Server
	for _, a := range aliases {
		servers = append(servers, ts.Server{Alias: a})
	}
	lab := ts.NewLab(t, "", servers...)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	helpers := ts.ProcChildren(m.Cmd.Process.Pid)
	if len(helpers) != 1 || !slices.Contains(ts.Cmdline(helpers[0]), childproc.SupervisorArg) {
		t.Fatalf("mcpmux's children %v, want one supervisor", helpers)
	}
	sup := helpers[0]
	forked := ts.ProcChildren(sup)
	pids := []int{sup}
	for _, alias := range aliases {
		pid := ts.ChildPid(t, m, alias)
		if !slices.Contains(forked, pid) {
			t.Errorf("%s (pid %d) not forked by the supervisor %d (its children %v)", alias, pid, sup, forked)
		}
		pids = append(pids, pid, ts.Grandchild(t, m, alias))
	}
	ts.SigkillLeavesNothing(t, m, pids)
}
