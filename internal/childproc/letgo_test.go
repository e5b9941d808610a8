package childproc

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync/atomic"
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

// A child that exited and is then stopped is released at the supervisor
// once.
func TestReleaseSentOnce(t *testing.T) {
	s := supervised(t)
	c, err := s.supervisorConn()
	if err != nil {
		t.Fatal(err)
	}
	// The socket's writer is replaced, before any child, by one that counts
	// the releases on their way.
	var releases atomic.Int32
	tapped := c.out
	c.out = newOutbox(func(b, oob []byte) error {
		var r supRequest
		if json.Unmarshal(b, &r) == nil && r.Op == "release" {
			releases.Add(1)
		}
		_, _, err := c.conn.WriteMsgUnix(b, oob, nil)
		return err
	})
	tapped.close(errors.New("replaced by the test's tap"))

	p, err := s.Start(context.Background(), Spec{Path: "true"})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p.Stop(ctx)
	// A spawn is sent after the releases posted before it, and waited for.
	startT(t, s, Spec{Path: "cat"})
	if n := releases.Load(); n != 1 {
		t.Errorf("%d releases sent for one child; want 1", n)
	}
}
