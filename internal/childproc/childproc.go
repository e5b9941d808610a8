// Package childproc owns the operating-system side of a child server: its
// process group, its pipes, noticing its exit, and stopping it and everything
// it started.
//
// Linux is the target. Each child leads its own process group, so that a
// wrapper (npx, a shell) and whatever it spawned are stopped together, and
// carries a parent-death signal, so that it does not outlive mcpmux even when
// mcpmux is killed with SIGKILL.
//
// A child may run as another user and group (when mcpmux runs as root), and
// then always with no_new_privs, so that no setuid binary or file capability
// gives it back what it was denied.
package childproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Graceful stop timings: the child first sees its stdin close, then SIGTERM,
// then SIGKILL.
const (
	StdinGrace   = 2 * time.Second
	SigtermGrace = 3 * time.Second

	groupPoll = 20 * time.Millisecond
)

// ErrSpawnerClosed is returned by Start after the Spawner was closed.
var ErrSpawnerClosed = errors.New("spawner closed")

// Spec describes a process to start.
type Spec struct {
	Path string   // resolved with exec.LookPath when it has no '/'
	Args []string // not including the program name
	Env  []string // the whole environment; nil means an empty one
	Dir  string
	// User and Group, each a name or a numeric id, are who the process runs
	// as; "" keeps mcpmux's own. With either set it runs with no_new_privs
	// and, when that switches its ids, with no supplementary groups. A user
	// not in the user database needs Group too.
	User  string
	Group string
}

// Spawner starts child processes from OS threads that stay alive until
// Close. The kernel delivers a parent-death signal when the thread that
// forked the child exits, not when the process does; Go may retire a thread
// at any time, so forking from an arbitrary goroutine could kill a healthy
// child.
//
// no_new_privs is per thread too, inherited by what the thread forks, and
// cannot be undone, so children with a User or Group are forked from a
// second thread that has it.
//
// With a guard binary, each child runs under a guard process (see RunGuard)
// that takes the child's whole process group down when mcpmux dies.
type Spawner struct {
	guard      string
	reqs       chan spawnReq // for the plain thread
	noNewPrivs chan spawnReq // for the no_new_privs thread
	quit       chan struct{}
	threads    sync.WaitGroup
}

type spawnReq struct {
	spec  Spec
	ids   *ids // nil: the child runs as mcpmux's user and group
	reply chan spawnReply
}

type spawnReply struct {
	p   *Process
	err error
}

// NewSpawner starts the spawning thread. guard is the path of a binary that
// runs RunGuard when its first argument is GuardArg, or "" to start children
// directly. The caller must Close the Spawner after every process it started
// has stopped.
func NewSpawner(guard string) *Spawner {
	s := &Spawner{guard: guard, reqs: make(chan spawnReq), noNewPrivs: make(chan spawnReq), quit: make(chan struct{})}
	s.threads.Go(func() { s.loop(s.reqs, false) })
	s.threads.Go(func() { s.loop(s.noNewPrivs, true) })
	return s
}

func (s *Spawner) loop(reqs <-chan spawnReq, noNewPrivs bool) {
	runtime.LockOSThread()
	var setup error
	if noNewPrivs {
		// Left locked, so that Go ends this thread with the loop rather than
		// hand it, no_new_privs and all, to other goroutines.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			setup = fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
	} else {
		// Unlocking on the way out hands the thread back instead of killing
		// it, so a child started by this thread and still alive (a caller
		// bug) is not killed by the thread's exit.
		defer runtime.UnlockOSThread()
	}
	for {
		select {
		case r := <-reqs:
			var rep spawnReply
			if rep.err = setup; rep.err == nil {
				rep.p, rep.err = start(r.spec, r.ids, s.guard)
			}
			r.reply <- rep
		case <-s.quit:
			return
		}
	}
}

// Close stops the spawning thread and waits for it.
func (s *Spawner) Close() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	s.threads.Wait()
}

// Start starts a process described by spec. A User or Group other than
// mcpmux's own fails with ErrNotRoot unless mcpmux runs as root.
func (s *Spawner) Start(ctx context.Context, spec Spec) (*Process, error) {
	id, change, err := credential(spec.User, spec.Group)
	if err != nil {
		return nil, err
	}
	reqs := s.reqs
	if id != nil {
		reqs = s.noNewPrivs
	}
	if !change {
		id = nil // already who the child is to be
	}
	reply := make(chan spawnReply, 1)
	select {
	case reqs <- spawnReq{spec, id, reply}:
	case <-s.quit:
		return nil, ErrSpawnerClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r := <-reply
	return r.p, r.err
}

// Process is a running child. Its pipes belong to the caller; Wait-ing is
// done by the Process itself, which notices the exit as it happens.
type Process struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.ReadCloser

	cmd      *exec.Cmd
	pgid     int
	lifeline *os.File    // the write end of a guard's lifeline; nil without a guard
	stopping atomic.Bool // Stop runs the group's shutdown itself
	done     chan struct{}
	err      error // the exit status; valid once done is closed
}

// start forks the process from the calling thread; with id, it runs as
// id: switched by the guard, which stays root, or by the fork itself.
func start(spec Spec, id *ids, guard string) (*Process, error) {
	path, err := exec.LookPath(spec.Path)
	if err != nil {
		return nil, err
	}
	deathSig := syscall.SIGKILL
	args := spec.Args
	var cred *syscall.Credential
	switch {
	case guard != "":
		head := []string{GuardArg, guardLifelineFlag}
		if id != nil {
			head = append(head, guardIDsFlag, id.guardArg())
		}
		args = append(append(head, "--", path), spec.Args...)
		path = guard
		// The guard catches it and takes the whole group down.
		deathSig = GuardDeathSignal
	case id != nil:
		cred = id.sysCredential()
	}
	cmd := exec.Command(path, args...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSig, Credential: cred}

	// A guard also gets a lifeline: the read end of a pipe whose only write
	// end mcpmux holds (see RunGuard). It is made before the child's pipes,
	// so that its write end has the lower descriptor and the kernel, which
	// closes a dying process's descriptors in order, ends it before the
	// child can see its stdin end.
	var lifeR, lifeW *os.File
	if guard != "" {
		if lifeR, lifeW, err = os.Pipe(); err != nil {
			return nil, err
		}
		cmd.ExtraFiles = []*os.File{lifeR}
	}
	// Plain os.Pipe rather than cmd.StdoutPipe: Wait would close the read end
	// as soon as the child exits and drop an answer it wrote just before.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		closeAll(lifeR, lifeW)
		return nil, err
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(lifeR, lifeW, stdinR, stdinW)
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(lifeR, lifeW, stdinR, stdinW, stdoutR, stdoutW)
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if err := cmd.Start(); err != nil {
		closeAll(lifeR, lifeW, stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	// The child has its own copies; ours would keep the pipes open forever.
	closeAll(lifeR, stdinR, stdoutW, stderrW)

	p := &Process{
		Stdin:    stdinW,
		Stdout:   stdoutR,
		Stderr:   stderrR,
		cmd:      cmd,
		pgid:     cmd.Process.Pid,
		lifeline: lifeW,
		done:     make(chan struct{}),
	}
	go p.wait()
	return p, nil
}

func (p *Process) wait() {
	p.err = p.cmd.Wait()
	if p.lifeline != nil {
		_ = p.lifeline.Close()
	}
	// Whatever a crashed child left behind in its group goes with it: a
	// leftover grandchild would otherwise hold the stdout pipe open and leave
	// pending calls waiting for an answer that cannot come.
	if !p.stopping.Load() {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	}
	close(p.done)
}

// Pid returns the child's process id, which is also its process group id.
func (p *Process) Pid() int { return p.pgid }

// Done is closed when the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns how the child exited: nil for status 0, an *exec.ExitError
// otherwise. It is valid once Done is closed.
func (p *Process) ExitErr() error {
	<-p.done
	return p.err
}

// Stop ends the child and its whole process group: stdin is closed, then
// after StdinGrace (or once the child exited) the group gets SIGTERM, then
// after SigtermGrace (or once the group is empty) SIGKILL. It returns once
// the child has been reaped; when ctx ends it skips to SIGKILL.
func (p *Process) Stop(ctx context.Context) {
	p.stopping.Store(true)
	_ = p.Stdin.Close()
	p.waitFor(ctx, StdinGrace)
	// The child may be gone, but what it started may not be: the whole
	// group gets its SIGTERM and its grace.
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	p.waitGroupGone(ctx, SigtermGrace)
	p.Kill()
	<-p.done
}

// waitGroupGone waits up to d for every process of the group to exit. The
// kernel offers no event for that, so it looks every groupPoll.
func (p *Process) waitGroupGone(ctx context.Context, d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			if errors.Is(syscall.Kill(-p.pgid, 0), syscall.ESRCH) {
				return
			}
		default:
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Kill sends SIGKILL to the child's whole process group at once.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
}

// waitFor waits up to d for the child to exit, or until ctx ends.
func (p *Process) waitFor(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}
