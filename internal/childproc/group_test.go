package childproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// needGroupPidfd skips where the kernel cannot signal a group through a
// pidfd (before Linux 6.9), where group falls back to kill(-pgid).
func needGroupPidfd(t *testing.T) {
	t.Helper()
	fd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		t.Skipf("no pidfd: %v", err)
	}
	defer unix.Close(fd)
	// The test is no group's leader: ESRCH says the flag is known.
	if err := unix.PidfdSendSignal(fd, 0, nil, pidfdSignalProcessGroup); errors.Is(err, syscall.EINVAL) {
		t.Skipf("no group signal through a pidfd: %v", err)
	}
}

// A group whose leader was reaped and left it empty, and whose id a new
// group then took, is not that new group: signalling it reaches no one.
func TestGroupIDReusedIsNotSignalled(t *testing.T) {
	needGroupPidfd(t)
	pidfd := -1
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, PidFD: &pidfd}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	g := newGroup(cmd.Process.Pid, pidfd)
	defer g.close()
	other := ts.StartAsPid(t, g.pgid)
	for _, sig := range []syscall.Signal{0, syscall.SIGKILL} {
		if err := g.signal(sig); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("signal %d to the emptied group: %v, want ESRCH", sig, err)
		}
	}
	if sig := ts.KilledBy(t, other); sig != syscall.SIGTERM {
		t.Errorf("the new group with the old id was killed by %v", sig)
	}
}

// A child that exited on its own with an empty group, whose id a new group
// took before it is stopped: neither Kill nor Stop reaches the new group,
// and Stop does not wait for a group that is gone (the condition it waits
// on holds at once).
func TestExitedChildsReusedGroupIsLeftAlone(t *testing.T) {
	needGroupPidfd(t)
	modes(t, func(t *testing.T, s *Spawner) {
		p := startT(t, s, Spec{Path: "true"})
		<-p.Done()
		other := ts.StartAsPid(t, p.Pid())
		if err := p.grp.signal(0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("group of an exited child with nothing left: %v, want ESRCH", err)
		}
		p.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		p.Stop(ctx)
		if sig := ts.KilledBy(t, other); sig != syscall.SIGTERM {
			t.Errorf("the new group with the old id was killed by %v", sig)
		}
	})
}

// A child that exits on its own while a grandchild lives in its group takes
// the grandchild with it.
func TestExitedLeaderGrandchildKilled(t *testing.T) {
	modes(t, func(t *testing.T, s *Spawner) {
		p := startT(t, s, Spec{Path: "sh", Args: []string{"-c", "sleep 1000 & echo $!"}})
		var grandchild int
		if _, err := fmt.Fscan(bufio.NewReader(p.Stdout), &grandchild); err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		ts.WaitFor(t, fmt.Sprintf("grandchild %d to die with its group", grandchild), func() bool { return !ts.Alive(grandchild) })
	})
}

// While Stop runs, a grandchild left by a leader that already exited is
// still the group's: it gets the SIGTERM through the leader's pidfd.
func TestStopReachesGrandchildAfterLeaderExit(t *testing.T) {
	modes(t, func(t *testing.T, s *Spawner) {
		p := startT(t, s, Spec{Path: "sh", Args: []string{"-c", "sleep 1000 & echo $!; read x"}})
		var grandchild int
		if _, err := fmt.Fscan(bufio.NewReader(p.Stdout), &grandchild); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		p.Stop(ctx) // stdin's end ends the leader; the sleep is left
		if ts.Alive(grandchild) {
			t.Errorf("grandchild %d alive after Stop", grandchild)
		}
	})
}
