package childproc

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// pidfdSignalProcessGroup is PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9), which
// golang.org/x/sys does not name.
const pidfdSignalProcessGroup = 1 << 2

// A group is a child's process group, named by a pidfd of its leader, made
// when the leader was forked. A process group's id is its leader's pid, and
// once the leader is reaped and the group is empty that id is free: a new,
// unrelated group may take it, and kill(-pgid) would reach that one. The
// kernel signals through the pidfd the group the leader made and no other,
// however long after the leader's exit: a group whose id was taken again
// gets nothing (ESRCH), so a group may be signalled at any time until it is
// closed.
type group struct {
	pgid int
	fd   *os.File // nil where the kernel made none (before Linux 5.3)
}

// newGroup names the group led by pgid, whose pidfd is fd (-1: none); the
// group owns fd.
func newGroup(pgid, fd int) group {
	g := group{pgid: pgid}
	if fd >= 0 {
		g.fd = os.NewFile(uintptr(fd), "pidfd")
	}
	return g
}

// signal sends sig to every process of the group; 0 only asks whether the
// group has any. ESRCH says it has none, or was closed.
//
// Before Linux 6.9, which cannot signal a group through a pidfd, and without
// a pidfd, it falls back to kill(-pgid), which an emptied group's reused id
// would mislead.
func (g *group) signal(sig syscall.Signal) error {
	if g.fd == nil {
		return syscall.Kill(-g.pgid, sig)
	}
	rc, err := g.fd.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.PidfdSendSignal(int(fd), sig, nil, pidfdSignalProcessGroup)
	}); err != nil {
		// Closed: the group was released, and nothing in it is ours now.
		return syscall.ESRCH
	}
	if errors.Is(serr, syscall.EINVAL) {
		return syscall.Kill(-g.pgid, sig)
	}
	return serr
}

// close gives up the group: signal no longer reaches it. Closing twice is
// harmless.
func (g *group) close() {
	if g.fd != nil {
		_ = g.fd.Close()
	}
}
