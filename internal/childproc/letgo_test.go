package childproc

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"weak"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// A supervisor that died is let go of: nothing of the Spawner's keeps its
// state once the children it started are gone.
func TestDeadSupervisorIsLetGo(t *testing.T) {
	s := supervised(t)
	// The Process refers to its supervisor: it is dropped with the closure.
	dead := func() weak.Pointer[supervisorConn] {
		p, err := s.Start(context.Background(), Spec{Path: "cat"})
		if err != nil {
			t.Fatal(err)
		}
		w := weak.Make(p.sup)
		if err := syscall.Kill(s.SupervisorPid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		p.Stop(ctx)
		return w
	}()
	ts.WaitFor(t, "the dead supervisor to be let go of", func() bool {
		runtime.GC()
		return dead.Value() == nil
	})
	if pid := s.SupervisorPid(); pid != 0 {
		t.Errorf("SupervisorPid %d with none alive", pid)
	}
	startT(t, s, Spec{Path: "cat"}) // and a new one starts
}
