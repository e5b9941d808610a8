package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// GuardArg, as the first argument of a binary that calls RunGuard, makes it
// run as a guard (see Spawner).
const GuardArg = "__mcpmux-guard"

// guardIDsFlag UID:GID, before "--", makes the guard start the child as
// UID:GID with no supplementary groups.
const guardIDsFlag = "--ids"

// guardLifelineFlag, before "--", says that descriptor 3 is the guard's
// lifeline: the read end of a pipe whose write end only mcpmux holds, so
// that it ends exactly when mcpmux does.
const guardLifelineFlag = "--lifeline"

const lifelineFD = 3

// GuardDeathSignal is the guard's parent-death signal. It is one mcpmux never
// sends otherwise: the kernel sends the parent-death signal when the thread
// that forked exits, which can be before the rest of mcpmux is gone, so the
// guard cannot tell a death from a stop by looking at its parent.
const GuardDeathSignal = syscall.SIGUSR1

// RunGuard runs args ([--lifeline] [--ids UID:GID] "--" path args...) as the guard of
// one child and returns the exit code to leave with.
//
// A parent-death signal reaches only the process it was set on, so a child
// that is itself a wrapper (npx, a shell) would leave its own children
// behind when mcpmux is killed outright. The guard leads the child's process
// group, starts the real command inside it, and when mcpmux dies it kills the
// whole group. Its stdin and stdout go straight to the child: it copies
// nothing.
//
// The guard runs with the child's environment, as mcpmux's user, and is
// non-dumpable like mcpmux, so a child of the same user cannot read its
// memory. With --ids the guard stays root (with the no_new_privs it got from
// mcpmux's spawning thread) and switches only the child: the child cannot
// signal or trace its guard, and the guard can still kill the whole group.
func RunGuard(args []string) int {
	// exec made this process dumpable again.
	if err := ProtectSelf(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpmux guard: %v\n", err)
		return 126
	}
	lifeline := false
	if len(args) >= 1 && args[0] == guardLifelineFlag {
		lifeline, args = true, args[1:]
		syscall.CloseOnExec(lifelineFD) // the child must not hold mcpmux's end open
	}
	var id *ids
	if len(args) >= 2 && args[0] == guardIDsFlag {
		var err error
		if id, err = parseGuardIDs(args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "mcpmux guard: %v\n", err)
			return 2
		}
		args = args[2:]
	}
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintln(os.Stderr, "mcpmux guard: usage: "+GuardArg+" ["+guardLifelineFlag+"] ["+guardIDsFlag+" UID:GID] -- PROGRAM [ARGS...]")
		return 2
	}
	// The child's own parent-death signal follows this thread.
	runtime.LockOSThread()
	parent := os.Getppid()
	death := make(chan os.Signal, 1)
	signal.Notify(death, GuardDeathSignal)
	// Caught, never ignored: an ignored signal would stay ignored in the
	// child across exec. A stop from mcpmux reaches the whole group, so the
	// child gets it itself and the guard simply waits for the child.
	stops := make(chan os.Signal, 1)
	signal.Notify(stops, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if os.Getppid() != parent {
		killGroup() // mcpmux died before the handler was in place
	}

	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if id != nil {
		cmd.SysProcAttr.Credential = id.sysCredential()
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpmux guard: %v\n", err)
		return 127
	}
	// The pipes' ends of the guard would otherwise keep them open after the
	// child and its descendants have gone.
	_ = os.Stdin.Close()
	_ = os.Stdout.Close()

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			// mcpmux's death ends the child's stdin, and a child may exit on
			// that before the kernel tells this guard of the death. The
			// lifeline has ended by then: the group still goes down.
			if lifeline && lifelineEnded() {
				killGroup()
			}
			return exitCode(err)
		case <-death:
			killGroup()
		case <-stops:
		}
	}
}

// lifelineEnded reports whether mcpmux's end of the lifeline is closed,
// without waiting.
func lifelineEnded() bool {
	fds := []unix.PollFd{{Fd: lifelineFD, Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLIN) != 0
	}
}

func killGroup() {
	_ = syscall.Kill(0, syscall.SIGKILL)
	os.Exit(137) // not reached: the guard is in the group
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}
