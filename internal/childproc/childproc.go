// Package childproc owns the operating-system side of a child server: its
// process group, its pipes, noticing its exit, and stopping it and everything
// it started.
//
// Linux is the target. Each child leads its own process group, so that a
// wrapper (npx, a shell) and whatever it spawned are stopped together. One
// supervisor process forks every child and kills every child's group when
// mcpmux dies, even of SIGKILL (see RunSupervisor).
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

// Spawner starts child processes.
//
// With a supervisor binary, every child is forked by one supervisor process
// (see RunSupervisor), started with the first child and again after it
// died, which takes every child's whole process group down when mcpmux dies.
//
// Without one, children are forked from OS threads of mcpmux that stay alive
// until Close. The kernel delivers a parent-death signal when the thread
// that forked the child exits, not when the process does; Go may retire a
// thread at any time, so forking from an arbitrary goroutine could kill a
// healthy child. no_new_privs is per thread too, inherited by what the
// thread forks, and cannot be undone, so children with a User or Group are
// forked from a second thread that has it. A child's own children then
// outlive a SIGKILLed mcpmux: this mode is for tests and for a binary that
// cannot find itself.
type Spawner struct {
	supervisor string
	reqs       chan spawnReq // for the plain thread
	noNewPrivs chan spawnReq // for the no_new_privs thread
	quit       chan struct{}
	threads    sync.WaitGroup

	supMu     sync.Mutex
	sup       *supervisorConn // the live supervisor; nil before the first child
	supStderr io.Writer       // where supervisors' stderr goes; nil: mcpmux's
	early     *heldWriter     // supStderr of a supervisor Prestart started; nil otherwise
	// readers are the supervisors' readers: each reaps its supervisor,
	// and then the Spawner lets go of it (gone).
	readers sync.WaitGroup
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

// NewSpawner returns a Spawner. supervisor is the path of a binary that runs
// RunSupervisor when its first argument is SupervisorArg, or "" to fork
// children from mcpmux itself. The caller must Close the Spawner after
// every process it started has stopped.
func NewSpawner(supervisor string) *Spawner {
	s := &Spawner{supervisor: supervisor, quit: make(chan struct{})}
	if supervisor == "" {
		s.reqs, s.noNewPrivs = make(chan spawnReq), make(chan spawnReq)
		s.threads.Go(func() { s.loop(s.reqs, false) })
		s.threads.Go(func() { s.loop(s.noNewPrivs, true) })
	}
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
				rep.p, rep.err = start(r.spec, r.ids)
			}
			r.reply <- rep
		case <-s.quit:
			return
		}
	}
}

// SetSupervisorStderr sends what supervisors write on their stderr (only
// ever why one failed) to w, for mcpmux's log, rather than to mcpmux's own
// stderr. It applies to the supervisors started after it, and to one
// Prestart started before it.
func (s *Spawner) SetSupervisorStderr(w io.Writer) {
	s.supMu.Lock()
	defer s.supMu.Unlock()
	s.supStderr = w
	s.early.bind(w) // a prestarted supervisor's, written before w was known
}

// Close stops the spawning threads or the supervisor, and waits for them.
func (s *Spawner) Close() {
	s.supMu.Lock()
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	sup := s.sup
	s.sup = nil
	s.supMu.Unlock()
	// Any other has exited (one is replaced only once gone); readers waits
	// for its reaping.
	if sup != nil {
		sup.close()
	}
	s.readers.Wait()
	s.threads.Wait()
	// Where it would have gone had the Spawner never been told.
	s.early.bind(os.Stderr)
}

// Start starts a process described by spec. A User or Group other than
// mcpmux's own fails with ErrNotRoot unless mcpmux runs as root.
func (s *Spawner) Start(ctx context.Context, spec Spec) (*Process, error) {
	id, change, err := credential(spec.User, spec.Group)
	if err != nil {
		return nil, err
	}
	nnp := id != nil
	if !change {
		id = nil // already who the child is to be
	}
	if spec.Path, err = exec.LookPath(spec.Path); err != nil {
		return nil, err
	}
	if s.supervisor != "" {
		return s.startSupervised(ctx, spec, id, nnp)
	}
	reqs := s.reqs
	if nnp {
		reqs = s.noNewPrivs
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

func (s *Spawner) startSupervised(ctx context.Context, spec Spec, id *ids, nnp bool) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.supervisorConn()
	if err != nil {
		return nil, err
	}
	return c.spawn(ctx, spec, spec.Path, id, nnp)
}

// supervisorConn returns the live supervisor, starting one if there is none.
func (s *Spawner) supervisorConn() (*supervisorConn, error) {
	s.supMu.Lock()
	defer s.supMu.Unlock()
	select {
	case <-s.quit:
		return nil, ErrSpawnerClosed
	default:
	}
	// One that is gone may not have been let go of yet.
	if s.sup != nil && !s.sup.isGone() {
		return s.sup, nil
	}
	c, err := startSupervisor(s.supervisor, s)
	if err != nil {
		return nil, err
	}
	s.sup = c
	return c, nil
}

// gone lets go of c, whose supervisor has exited and been reaped.
func (s *Spawner) gone(c *supervisorConn) {
	s.supMu.Lock()
	defer s.supMu.Unlock()
	if s.sup == c {
		s.sup = nil
	}
}

// SupervisorPid returns the pid of the live supervisor, or 0 when there is
// none.
func (s *Spawner) SupervisorPid() int {
	s.supMu.Lock()
	defer s.supMu.Unlock()
	if s.sup == nil || s.sup.isGone() {
		return 0
	}
	return s.sup.pid()
}

// Process is a running child. Its pipes belong to the caller; Wait-ing is
// done by the Process itself (or its supervisor), which notices the exit as
// it happens.
type Process struct {
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.ReadCloser

	cmd      *exec.Cmd       // without a supervisor
	sup      *supervisorConn // with one
	spawnID  uint64          // the supervisor's request that started it
	grp      group           // signalled only through this, never by id
	stopping atomic.Bool     // Stop runs the group's shutdown itself
	released atomic.Bool     // the supervisor was told the group is gone
	done     chan struct{}
	err      error // the exit status; valid once done is closed
}

// start forks the process from the calling thread; with id, it runs as id.
func start(spec Spec, id *ids) (*Process, error) {
	path := spec.Path // resolved by Start
	var cred *syscall.Credential
	if id != nil {
		cred = id.sysCredential()
	}
	cmd := exec.Command(path, spec.Args...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = spec.Dir
	pidfd := -1
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred, PidFD: &pidfd}

	// Plain os.Pipe rather than cmd.StdoutPipe: Wait would close the read end
	// as soon as the child exits and drop an answer it wrote just before.
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW, err := stdioPipes()
	if err != nil {
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if err := cmd.Start(); err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	// The child has its own copies; ours would keep the pipes open forever.
	closeAll(stdinR, stdoutW, stderrW)

	p := &Process{
		Stdin:  stdinW,
		Stdout: stdoutR,
		Stderr: stderrR,
		cmd:    cmd,
		grp:    newGroup(cmd.Process.Pid, pidfd),
		done:   make(chan struct{}),
	}
	go func() { p.finish(p.cmd.Wait()) }()
	return p, nil
}

// finish records the child's exit.
func (p *Process) finish(err error) {
	p.err = err
	// Whatever a crashed child left behind in its group goes with it: a
	// leftover grandchild would otherwise hold the stdout pipe open and leave
	// pending calls waiting for an answer that cannot come.
	if !p.stopping.Load() {
		_ = p.grp.signal(syscall.SIGKILL)
		p.release()
	}
	close(p.done)
}

// release tells a supervisor that the group is gone. The Process keeps its
// own pidfd until Stop returns (or it is collected): a grandchild still
// dying of its SIGKILL is waited for, and one in a group whose id was taken
// again is never confused with the new group. It tells the supervisor
// once, though a child that exited and is then stopped gets here twice.
func (p *Process) release() {
	if p.sup != nil && p.released.CompareAndSwap(false, true) {
		p.sup.release(p)
	}
}

// Pid returns the child's process id, which is also its process group id.
func (p *Process) Pid() int { return p.grp.pgid }

// Done is closed when the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitErr returns how the child exited: nil for status 0, an *ExitError
// (an *exec.ExitError without a supervisor) or ErrSupervisorGone otherwise.
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
	_ = p.grp.signal(syscall.SIGTERM)
	p.waitGroupGone(ctx, SigtermGrace)
	p.Kill()
	<-p.done
	p.release()
	p.grp.close()
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
			if errors.Is(p.grp.signal(0), syscall.ESRCH) {
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

// Kill sends SIGKILL to the child's whole process group at once; once Stop
// has returned it signals no one.
func (p *Process) Kill() {
	_ = p.grp.signal(syscall.SIGKILL)
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

// stdioPipes makes the pipes of a child's stdin, stdout and stderr: the
// child's end and mcpmux's end of each.
func stdioPipes() (stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW *os.File, err error) {
	if stdinR, stdinW, err = os.Pipe(); err != nil {
		return
	}
	if stdoutR, stdoutW, err = os.Pipe(); err != nil {
		closeAll(stdinR, stdinW)
		return
	}
	if stderrR, stderrW, err = os.Pipe(); err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
	}
	return
}
