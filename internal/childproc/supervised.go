package childproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrSupervisorGone is the exit error of a child whose supervisor exited
// before it (it was killed with it), and the error of a Start it cut short.
var ErrSupervisorGone = errors.New("mcpmux's supervisor process exited")

// ExitError is how a supervised child exited, when not with status 0; its
// text is the one os/exec gives.
type ExitError struct{ Status syscall.WaitStatus }

func (e *ExitError) Error() string {
	var s string
	switch ws := e.Status; {
	case ws.Exited():
		s = "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		s = "signal: " + ws.Signal().String()
	default:
		s = "wait status " + strconv.Itoa(int(ws))
	}
	if e.Status.CoreDump() {
		s += " (core dumped)"
	}
	return s
}

// supervisorConn is mcpmux's side of one supervisor process: the socket
// that carries requests, answers and exits and is the supervisor's lifeline.
// Its reader goroutine is owned by the Spawner, which waits for it and
// lets go of the conn once the supervisor is gone.
type supervisorConn struct {
	conn *net.UnixConn
	out  *outbox // the one writer of conn; read closes it
	cmd  *exec.Cmd
	done chan struct{} // closed once the supervisor has exited and been reaped
	// maxRequest is the longest request the socket's buffers carry, at most
	// maxMessage.
	maxRequest int

	mu      sync.Mutex
	gone    bool
	nextID  uint64
	pending map[uint64]chan error // spawn requests awaiting their answer
	procs   map[int]*Process      // running children, by pid
	// spawning are the Processes of pending requests, by request id.
	spawning map[uint64]*Process
}

// startSupervisor starts binary as a supervisor (see RunSupervisor) for
// owner.
func startSupervisor(binary string, owner *Spawner) (*supervisorConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("supervisor socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "supervisor-lifeline")
	defer theirs.Close()
	limit, err := sizeBuffers(fds[0], fds[1])
	if err != nil {
		closeAll(ours)
		return nil, fmt.Errorf("supervisor socket: %w", err)
	}
	fc, err := net.FileConn(ours)
	_ = ours.Close()
	if err != nil {
		return nil, fmt.Errorf("supervisor socket: %w", err)
	}
	cmd := exec.Command(binary, SupervisorArg)
	cmd.Env = []string{}
	cmd.Stderr = os.Stderr
	if owner.supStderr != nil { // supMu is held (supervisorConn)
		cmd.Stderr = owner.supStderr
		// exec copies it through a pipe, which only the supervisor holds;
		// should anything else hold it, the reaping still ends.
		cmd.WaitDelay = time.Second
	}
	cmd.ExtraFiles = []*os.File{theirs}
	// Its own group: a terminal's ^C is mcpmux's to act on, not the
	// supervisor's.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = fc.Close()
		return nil, fmt.Errorf("start supervisor %s: %w", binary, err)
	}
	c := &supervisorConn{
		conn: fc.(*net.UnixConn), cmd: cmd, done: make(chan struct{}), maxRequest: limit,
		pending: map[uint64]chan error{}, procs: map[int]*Process{}, spawning: map[uint64]*Process{},
	}
	c.out = newOutbox(func(b, oob []byte) error {
		_, _, err := c.conn.WriteMsgUnix(b, oob, nil)
		return err
	})
	owner.readers.Go(func() {
		c.read()
		owner.gone(c)
	})
	return c, nil
}

// sizeBuffers sets both ends' buffers for a message of maxMessage (a
// SEQPACKET message must fit the sender's buffer whole, and the default,
// net.core.wmem_default, is less) and returns the longest message they
// carry: less than maxMessage where net.core.wmem_max caps the buffer.
func sizeBuffers(fds ...int) (int, error) {
	limit := maxMessage
	for _, fd := range fds {
		for _, opt := range []int{unix.SO_SNDBUF, unix.SO_RCVBUF} {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, maxMessage+maxMessage/4); err != nil {
				return 0, fmt.Errorf("setsockopt: %w", err)
			}
			// The kernel doubles what it grants, for its own bookkeeping;
			// half of that is for the message.
			got, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
			if err != nil {
				return 0, fmt.Errorf("getsockopt: %w", err)
			}
			limit = min(limit, got/2)
		}
	}
	return limit, nil
}

// pid returns the supervisor's process id.
func (c *supervisorConn) pid() int { return c.cmd.Process.Pid }

// spawn has the supervisor start path as spec says. A child started for a
// caller that gave up (ctx) is killed as soon as it is known.
func (c *supervisorConn) spawn(ctx context.Context, spec Spec, path string, id *ids, nnp bool) (*Process, error) {
	stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW, err := stdioPipes()
	if err != nil {
		return nil, err
	}
	p := &Process{Stdin: stdinW, Stdout: stdoutR, Stderr: stderrR, sup: c, done: make(chan struct{})}
	req := supRequest{Op: "spawn", Path: path, Args: spec.Args, Env: spec.Env, Dir: spec.Dir, NoNewPrivs: nnp}
	if id != nil {
		req.IDs = id.arg()
	}
	reply := make(chan error, 1)
	c.mu.Lock()
	if c.gone {
		c.mu.Unlock()
		closeAll(stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW)
		return nil, ErrSupervisorGone
	}
	c.nextID++
	req.ID = c.nextID
	p.spawnID = req.ID
	c.pending[req.ID] = reply
	c.spawning[req.ID] = p
	c.mu.Unlock()

	b, err := json.Marshal(req)
	if err == nil && len(b) > c.maxRequest {
		err = fmt.Errorf("arguments and environment take %d bytes, more than the %d a request may", len(b), c.maxRequest)
	}
	if err == nil {
		sent := make(chan error, 1)
		c.out.post(b, unix.UnixRights(int(stdinR.Fd()), int(stdoutW.Fd()), int(stderrW.Fd())), func(err error) { sent <- err })
		err = <-sent
	}
	// The supervisor has its own copies now; ours would keep the pipes open.
	closeAll(stdinR, stdoutW, stderrW)
	if err != nil {
		c.mu.Lock()
		_, waiting := c.pending[req.ID]
		delete(c.pending, req.ID)
		delete(c.spawning, req.ID)
		c.mu.Unlock()
		if waiting {
			closeAll(stdinW, stdoutR, stderrR)
			return nil, fmt.Errorf("ask the supervisor to start %s: %w", path, err)
		}
	}
	select {
	case err = <-reply:
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.pending[req.ID]
		delete(c.pending, req.ID) // read kills the child when it learns its pid
		c.mu.Unlock()
		if waiting {
			closeAll(stdinW, stdoutR, stderrR)
			return nil, ctx.Err()
		}
		err = <-reply // the answer is on its way
	}
	if err != nil {
		closeAll(stdinW, stdoutR, stderrR)
		return nil, err
	}
	return p, nil
}

// read takes the supervisor's messages until its socket ends, then ends
// every child still running: the supervisor's death killed them.
func (c *supervisorConn) read() {
	defer close(c.done)
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := c.conn.ReadMsgUnix(buf, oob) // MSG_CMSG_CLOEXEC
		if err != nil || n == 0 {
			break
		}
		var pidfd *os.File
		if files := receivedFiles(oob[:oobn]); len(files) == 1 {
			pidfd = files[0]
		} else {
			closeAll(files...)
		}
		var m supMessage
		if json.Unmarshal(buf[:n], &m) != nil {
			closeAll(pidfd)
			continue
		}
		switch {
		case m.ID != 0:
			c.mu.Lock()
			reply, p := c.pending[m.ID], c.spawning[m.ID]
			delete(c.pending, m.ID)
			delete(c.spawning, m.ID)
			if m.Err == "" && p != nil {
				p.grp = group{pgid: m.Pid, fd: pidfd}
				c.procs[m.Pid] = p
			} else {
				closeAll(pidfd)
			}
			c.mu.Unlock()
			if reply == nil && p != nil && m.Err == "" {
				p.Kill() // its caller gave up; its exit ends it as any other's
			}
			if reply != nil {
				if m.Err != "" {
					reply <- errors.New(m.Err)
				} else {
					reply <- nil
				}
			}
		case m.Exited != 0:
			closeAll(pidfd)
			c.mu.Lock()
			p := c.procs[m.Exited]
			delete(c.procs, m.Exited)
			c.mu.Unlock()
			if p != nil {
				var err error
				if ws := syscall.WaitStatus(m.Status); ws != 0 {
					err = &ExitError{Status: ws}
				}
				p.finish(err)
			}
		}
	}
	c.out.close(ErrSupervisorGone)
	c.mu.Lock()
	c.gone = true
	pending, procs := c.pending, c.procs
	c.pending, c.procs, c.spawning = nil, nil, nil
	c.mu.Unlock()
	for _, reply := range pending {
		reply <- ErrSupervisorGone
	}
	for _, p := range procs {
		p.finish(ErrSupervisorGone)
	}
	_ = c.conn.Close()
	_ = c.cmd.Wait()
}

// release tells the supervisor that mcpmux is done with p's group. It never
// blocks: read calls it.
func (c *supervisorConn) release(p *Process) {
	b, _ := json.Marshal(supRequest{Op: "release", ID: p.spawnID})
	c.out.post(b, nil, nil)
}

// close ends the lifeline: the supervisor kills what is left and exits.
func (c *supervisorConn) close() {
	_ = c.conn.CloseWrite()
	<-c.done
}

func (c *supervisorConn) isGone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone
}
