package childproc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SupervisorArg, as the first argument of a binary that calls
// RunSupervisor, makes it run as the supervisor (see Spawner).
const SupervisorArg = "__mcpmux-supervisor"

// supervisorFD is the supervisor's end of its socket to mcpmux.
const supervisorFD = 3

// maxMessage bounds one message on the socket: a spawn request carries the
// child's whole environment.
const maxMessage = 256 << 10

// A request, from mcpmux to the supervisor. Op "spawn" comes with the
// child's stdin, stdout and stderr as SCM_RIGHTS; op "release" says mcpmux
// is done with the process group of the child spawn ID started, which the
// supervisor then no longer kills when mcpmux dies.
type supRequest struct {
	Op   string   `json:"op"`
	ID   uint64   `json:"id,omitempty"`
	Path string   `json:"path,omitempty"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// IDs is "UID:GID" for a child that switches to them; NoNewPrivs says
	// it runs with no_new_privs (every child with a User or Group does).
	IDs        string `json:"ids,omitempty"`
	NoNewPrivs bool   `json:"nnp,omitempty"`
}

// A message from the supervisor: the answer to spawn ID (Pid, or Err), or
// the exit of child Exited with its wait status. An answer with a Pid comes
// with a pidfd of the child as SCM_RIGHTS, where the kernel made one: its
// group is signalled through it (see group).
type supMessage struct {
	ID     uint64 `json:"id,omitempty"`
	Pid    int    `json:"pid,omitempty"`
	Err    string `json:"err,omitempty"`
	Exited int    `json:"exited,omitempty"`
	Status uint32 `json:"status,omitempty"`
}

// RunSupervisor runs the supervisor of every child mcpmux starts, and
// returns the exit code to leave with. mcpmux starts one, lazily, with
// descriptor 3 a unix socket to it; the socket is also its lifeline: it
// ends exactly when mcpmux's end closes, on mcpmux's death as on its stop.
//
// A parent-death signal reaches only the process it was set on, so a child
// that is itself a wrapper (npx, a shell) would leave its own children
// behind when mcpmux is killed outright. The supervisor forks each child as
// the leader of its own process group and, when the lifeline ends, kills
// every group mcpmux has not released, whether its leader is still running
// or not. Every group is signalled through its leader's pidfd, never by id:
// a leader is reaped as soon as it exits, and the id of a group it left
// empty may be another group's by the time it is killed (see group). The
// child's stdin, stdout and stderr are mcpmux's pipes, passed over the
// socket: the supervisor copies nothing.
//
// The supervisor runs as mcpmux's user, with an empty environment, and is
// non-dumpable like mcpmux. A child with ids is switched to them by the
// fork and forked from a thread with no_new_privs; the supervisor stays
// root, so the child cannot signal or trace it.
//
// Almost nothing of the binary it shares with mcpmux runs in it, so once
// set up it returns its heap and the pages of the binary that initialisation
// touched to the kernel; RSS is what its loop uses.
func RunSupervisor() int {
	if err := ProtectSelf(); err != nil {
		fmt.Fprintf(os.Stderr, "mcpmux supervisor: %v\n", err)
		return 126
	}
	syscall.CloseOnExec(supervisorFD) // no child may hold the lifeline open
	// Caught, never ignored (an ignored signal stays ignored in children):
	// a stop reaches the children from mcpmux, and the supervisor lives
	// exactly as long as its lifeline.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	debug.SetGCPercent(10)

	s := &supervisor{groups: map[uint64]group{}, plain: make(chan spawnJob), nnp: make(chan spawnJob),
		forked: make(chan struct{}, 1), busy: make(chan struct{}, 1), out: newOutbox(sendToMux)}
	go s.reap()
	go s.forker(s.plain, false)
	go s.forker(s.nnp, true)
	go s.trimmer()
	s.serve()
	s.killGroups()
	return 0
}

type supervisor struct {
	// out is the only writer of the socket: serve, which reads it, must
	// never wait for mcpmux to read, nor anything holding mu (see outbox).
	out    *outbox
	mu     sync.Mutex
	dying  bool             // killGroups has run: nothing more is forked
	groups map[uint64]group // children's groups not yet released, by spawn id
	plain  chan spawnJob
	nnp    chan spawnJob
	forked chan struct{} // a child was forked, for reap
	busy   chan struct{} // a child was forked, for trimmer
}

// trimIdle is how long the supervisor waits after its start, or its last
// fork, before it trims its memory: mcpmux starts its children together,
// and trimming between two forks would make each wait for the trim and
// then fault back in the code it dropped.
const trimIdle = 200 * time.Millisecond

type spawnJob struct {
	req   supRequest
	files []*os.File // stdin, stdout, stderr
}

// serve reads requests until the lifeline ends.
func (s *supervisor) serve() {
	buf := make([]byte, maxMessage)
	oob := make([]byte, unix.CmsgSpace(3*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(supervisorFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return // mcpmux's end is closed: it stopped or died
		}
		files := receivedFiles(oob[:oobn])
		var req supRequest
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			closeAll(files...)
			fmt.Fprintf(os.Stderr, "mcpmux supervisor: bad request: %v\n", err)
			continue
		}
		switch req.Op {
		case "spawn":
			if len(files) != 3 {
				closeAll(files...)
				s.send(supMessage{ID: req.ID, Err: fmt.Sprintf("spawn request with %d descriptors, want 3", len(files))})
				continue
			}
			if req.NoNewPrivs {
				s.nnp <- spawnJob{req, files}
			} else {
				s.plain <- spawnJob{req, files}
			}
		case "release":
			closeAll(files...)
			s.mu.Lock()
			if g, ok := s.groups[req.ID]; ok {
				g.close()
				delete(s.groups, req.ID)
			}
			s.mu.Unlock()
		default:
			closeAll(files...)
		}
	}
}

func receivedFiles(oob []byte) []*os.File {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "child-stdio"))
		}
	}
	return files
}

// forker forks children from one OS thread that lives as long as the
// supervisor: a child's parent-death signal follows the thread that forked
// it. With nnp the thread has no_new_privs, which its children inherit.
func (s *supervisor) forker(jobs <-chan spawnJob, nnp bool) {
	runtime.LockOSThread() // never unlocked: the thread ends with the process
	var setup error
	if nnp {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			setup = fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
	}
	for j := range jobs {
		if s.forkJob(j, setup) {
			for _, ch := range []chan struct{}{s.forked, s.busy} {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
	}
}

// forkJob forks the child of j, unless setup failed or the supervisor is
// dying, and answers mcpmux; it says whether a child was forked.
func (s *supervisor) forkJob(j spawnJob, setup error) bool {
	// Held from before the fork until the answer is queued, so that reap
	// cannot report the child's exit first: mcpmux learns the pid first.
	s.mu.Lock()
	defer s.mu.Unlock()
	defer closeAll(j.files...) // the child has its own copies
	if s.dying {
		// killGroups has run: a child forked now would outlive mcpmux.
		return false
	}
	err := setup
	var cmd *exec.Cmd
	pidfd := -1
	if err == nil {
		cmd, err = s.fork(j, &pidfd)
	}
	if err != nil {
		s.send(supMessage{ID: j.req.ID, Err: err.Error()})
		return false
	}
	pid := cmd.Process.Pid
	s.groups[j.req.ID] = newGroup(pid, pidfd)
	b, _ := json.Marshal(supMessage{ID: j.req.ID, Pid: pid})
	// mcpmux gets its own pidfd: the supervisor closes its own on release,
	// which may come before the outbox has sent this.
	var oob []byte
	var sent func(error)
	if pidfd >= 0 {
		if dup, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
			oob, sent = unix.UnixRights(dup), func(error) { _ = unix.Close(dup) }
		}
	}
	s.out.post(b, oob, sent)
	// reap waits for every child; the handle would only hold a pidfd.
	_ = cmd.Process.Release()
	return true
}

// trimmer trims the supervisor's memory once setting up, and then each
// burst of forks, has been over for trimIdle: children start rarely, and
// what starting one touched is not needed until the next.
func (s *supervisor) trimmer() {
	t := time.NewTimer(trimIdle)
	for {
		select {
		case <-s.busy:
			t.Reset(trimIdle)
		case <-t.C:
			trimMemory()
		}
	}
}

// fork starts j's child, leader of its own group, and stores its pidfd (or
// -1) in pidfd.
func (s *supervisor) fork(j spawnJob, pidfd *int) (*exec.Cmd, error) {
	cmd := exec.Command(j.req.Path, j.req.Args...)
	cmd.Env = j.req.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = j.req.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = j.files[0], j.files[1], j.files[2]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: pidfd}
	if j.req.IDs != "" {
		id, err := parseIDs(j.req.IDs)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Credential = id.sysCredential()
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", j.req.Path, err)
	}
	return cmd, nil
}

// reap reports every child's exit. One thread waits for all of them
// rather than one per child.
func (s *supervisor) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case errors.Is(err, syscall.ECHILD):
			<-s.forked // no child yet: wait for one
		case err == nil:
			// Under mu, so that the answer to its spawn is queued first.
			s.mu.Lock()
			s.send(supMessage{Exited: pid, Status: uint32(ws)})
			s.mu.Unlock()
		}
	}
}

// send queues one message to mcpmux without waiting for it to be sent;
// messages go in the order sent was called.
func (s *supervisor) send(m supMessage) {
	b, _ := json.Marshal(m)
	s.out.post(b, nil, nil)
}

// sendToMux writes one message; once mcpmux is gone nothing is sent.
func sendToMux(b, oob []byte) error {
	for {
		err := unix.Sendmsg(supervisorFD, b, oob, nil, 0)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// killGroups kills every group not released, running or not: a child that
// exited on its stdin's end may have left a grandchild in its group. A
// forker that took a job before the lifeline ended forks nothing after.
func (s *supervisor) killGroups() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dying = true
	for _, g := range s.groups {
		_ = g.signal(syscall.SIGKILL)
	}
}

// trimMemory hands back to the kernel what setting up the process left in
// it: the heap's free pages, and the pages of code and read-only data (of
// the executable, and of libc when it is linked) that initialisation
// touched, which the kernel maps again from the page cache if they are used.
// Only mappings no page of which was ever written (no anonymous page,
// resident or swapped, and nothing dirty) are dropped: for those the file is
// exactly their content.
func trimMemory() {
	debug.FreeOSMemory()
	// Random: a page used again is mapped alone, not with the 15 around it
	// the kernel would otherwise map too.
	dropFilePages(true)
}

type mapping struct{ start, end uintptr }

// unwrittenFileMappings reads smaps and returns the private, read-only
// mappings of files of which no page was ever written.
func unwrittenFileMappings(r io.Reader) []mapping {
	type entry struct {
		mapping
		file    bool // private, read-only, of a file
		written bool
	}
	var maps []entry
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && len(fields[1]) == 4 {
			lo, hi, _ := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			perm := fields[1]
			file := len(fields) >= 6 && strings.HasPrefix(fields[5], "/")
			maps = append(maps, entry{mapping: mapping{uintptr(start), uintptr(end)},
				file: err1 == nil && err2 == nil && file && perm[1] == '-' && perm[3] == 'p'})
			continue
		}
		if len(maps) == 0 {
			continue
		}
		// A page copied on write is anonymous: counted in Anonymous while
		// resident, in Swap once swapped out (a relocated RELRO page, the
		// GOT). Dropping one would bring back the file's unrelocated bytes.
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "Anonymous" || k == "Swap" || k == "Private_Dirty") {
			if strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")) != "0" {
				maps[len(maps)-1].written = true
			}
		}
	}
	var out []mapping
	for _, m := range maps {
		if m.file && !m.written {
			out = append(out, m.mapping)
		}
	}
	return out
}

func madvise(addr, length uintptr, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, addr, length, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
