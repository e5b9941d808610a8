package childproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// fakeMuxArg makes the test binary stand in for mcpmux: runFakeMux starts
// children through a supervisor, says who they are, and waits to be killed.
const fakeMuxArg = "__childproc-fake-mux"

// grandchildScripts start a grandchild in the child's group and print its
// pid. The first child ignores its stdin; the second exits when it ends,
// as most servers do, at about the moment the supervisor learns of
// mcpmux's death.
var grandchildScripts = []string{
	"sleep 1000 & echo $!; exec sleep 1000",
	"sleep 1000 & echo $!; cat",
}

type fakeMuxReport struct {
	Supervisor    int   `json:"supervisor"`
	Children      []int `json:"children"`
	Grandchildren []int `json:"grandchildren"`
}

// runFakeMux starts one child per grandchildScripts (as user args[0] when
// given), reports, and blocks until killed.
func runFakeMux(args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var user string
	if len(args) > 0 {
		user = args[0]
	}
	s := NewSpawner(self)
	var r fakeMuxReport
	for _, script := range grandchildScripts {
		p, err := s.Start(context.Background(), Spec{Path: "sh", Args: []string{"-c", script}, User: user})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		var pid int
		if _, err := fmt.Fscan(bufio.NewReader(p.Stdout), &pid); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.Children = append(r.Children, p.Pid())
		r.Grandchildren = append(r.Grandchildren, pid)
	}
	r.Supervisor = s.SupervisorPid()
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	select {}
}

// A SIGKILLed mcpmux leaves nothing behind: its supervisor, every child
// (one ignoring its stdin, one exiting when it ends) and every grandchild
// die with it; every child was forked by the one supervisor.
func TestSIGKILLedMuxLeavesNothing(t *testing.T) {
	users := []string{""}
	if os.Geteuid() == 0 {
		nobody(t)
		users = append(users, "nobody")
	}
	for _, user := range users {
		t.Run("user="+user, func(t *testing.T) {
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, fakeMuxArg, user)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var r fakeMuxReport
			if err := json.NewDecoder(out).Decode(&r); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("fake mcpmux's report: %v", err)
			}
			if r.Supervisor == 0 || r.Supervisor == cmd.Process.Pid {
				t.Errorf("supervisor pid %d (mcpmux %d)", r.Supervisor, cmd.Process.Pid)
			}
			forked := ts.ProcChildren(r.Supervisor)
			for _, c := range r.Children {
				if !slices.Contains(forked, c) {
					t.Errorf("child %d not forked by the supervisor %d (its children: %v)", c, r.Supervisor, forked)
				}
			}
			all := slices.Concat([]int{r.Supervisor}, r.Children, r.Grandchildren)
			for _, pid := range all {
				if !ts.Alive(pid) {
					t.Fatalf("pid %d not running before the kill", pid)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			for _, pid := range all {
				ts.WaitFor(t, fmt.Sprintf("pid %d to die with mcpmux", pid), func() bool { return !ts.Alive(pid) })
			}
		})
	}
}

func supervised(t *testing.T) *Spawner {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := NewSpawner(self)
	t.Cleanup(func() {
		pid := s.SupervisorPid()
		s.Close()
		if pid != 0 && ts.Alive(pid) {
			t.Errorf("supervisor %d still running after Close", pid)
		}
	})
	return s
}

// A supervised child's exit reaches mcpmux with its status, worded as
// os/exec words it.
func TestSupervisedExitStatus(t *testing.T) {
	s := supervised(t)
	cases := []struct{ script, want string }{
		{"exit 0", ""},
		{"exit 3", "exit status 3"},
		{"kill -9 $$", "signal: killed"},
	}
	for _, c := range cases {
		p := startT(t, s, Spec{Path: "sh", Args: []string{"-c", c.script}})
		<-p.Done()
		got := ""
		if err := p.ExitErr(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: exit %q, want %q", c.script, got, c.want)
		}
	}
}

// A supervisor that dies takes its children with it, and they are seen to
// end, grandchildren and all; the next child gets a new supervisor.
func TestSupervisorDeath(t *testing.T) {
	s := supervised(t)
	p := startT(t, s, Spec{Path: "sh", Args: []string{"-c", grandchildScripts[0]}})
	var grandchild int
	if _, err := fmt.Fscan(bufio.NewReader(p.Stdout), &grandchild); err != nil {
		t.Fatal(err)
	}
	first := s.SupervisorPid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if err := p.ExitErr(); !errors.Is(err, ErrSupervisorGone) {
		t.Errorf("exit %v, want ErrSupervisorGone", err)
	}
	for _, pid := range []int{p.Pid(), grandchild} {
		ts.WaitFor(t, fmt.Sprintf("pid %d to die with the supervisor", pid), func() bool { return !ts.Alive(pid) })
	}
	q := startT(t, s, Spec{Path: "cat"})
	if second := s.SupervisorPid(); second == first || second == 0 || !slices.Contains(ts.ProcChildren(second), q.Pid()) {
		t.Errorf("after the first supervisor %d died, %d forked by %d", first, q.Pid(), second)
	}
}

// Close ends a supervisor that still has a child: the child and its group
// are killed, and seen to end.
func TestCloseKillsWhatIsLeft(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := NewSpawner(self)
	p, err := s.Start(context.Background(), Spec{Path: "sh", Args: []string{"-c", grandchildScripts[0]}})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	if _, err := fmt.Fscan(bufio.NewReader(p.Stdout), &grandchild); err != nil {
		t.Fatal(err)
	}
	sup := s.SupervisorPid()
	s.Close()
	<-p.Done()
	for _, pid := range []int{sup, p.Pid(), grandchild} {
		ts.WaitFor(t, fmt.Sprintf("pid %d to die", pid), func() bool { return !ts.Alive(pid) })
	}
	if _, err := s.Start(context.Background(), Spec{Path: "cat"}); !errors.Is(err, ErrSpawnerClosed) {
		t.Errorf("Start after Close: %v", err)
	}
}

// A Start whose caller gives up before the supervisor answers returns the
// context's error, and the child started all the same is killed and
// reaped once its pid is known.
func TestAbandonedStartIsKilled(t *testing.T) {
	s := supervised(t)
	startT(t, s, Spec{Path: "cat"}) // the supervisor is up
	sup := s.SupervisorPid()
	// Stopped, it cannot answer until continued.
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Start(ctx, Spec{Path: "sleep", Args: []string{"1000"}})
		errc <- err
	}()
	c := s.sup
	ts.WaitFor(t, "the request to be sent", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.spawning) == 1
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Start: %v, want context.Canceled", err)
	}
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ts.WaitFor(t, "the abandoned child to be killed and reaped", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.spawning) == 0 && len(c.procs) == 1 // the cat alone
	})
}

// A request larger than the socket carries is refused before it is sent.
func TestOversizedRequest(t *testing.T) {
	s := supervised(t)
	_, err := s.Start(context.Background(), Spec{Path: "true", Env: []string{"BIG=" + strings.Repeat("x", maxMessage)}})
	if err == nil || !strings.Contains(err.Error(), "more than the 262144 a request may") {
		t.Fatalf("err %v", err)
	}
}

// A request under maxMessage but over the socket's default send buffer
// (net.core.wmem_default, 212992) reaches the supervisor: the buffers are
// sized for maxMessage.
func TestLargeRequest(t *testing.T) {
	s := supervised(t)
	var env []string
	for i := range 3 { // one string over 128 KiB would fail the exec
		env = append(env, fmt.Sprintf("BIG%d=%s", i, strings.Repeat("x", 80<<10)))
	}
	p, err := s.Start(context.Background(), Spec{Path: "true", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ExitErr(); err != nil {
		t.Fatal(err)
	}
}

// What a supervisor writes on its stderr (a failure to set itself up, a
// request it cannot read) goes where the Spawner is told, mcpmux's log,
// not straight to mcpmux's stderr. The supervisor here is a script that
// says so and exits, as one that cannot protect itself does.
func TestSupervisorStderrGoesWhereTold(t *testing.T) {
	script := filepath.Join(t.TempDir(), "supervisor")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'mcpmux supervisor: cannot start' >&2\nexit 126\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	s := NewSpawner(script)
	s.SetSupervisorStderr(&got)
	if p, err := s.Start(context.Background(), Spec{Path: "true"}); err == nil {
		p.Kill()
		<-p.Done()
		t.Error("a child started under a supervisor that exited at once")
	}
	s.Close() // waits for the supervisor's reaping, and so for its stderr
	if want := "mcpmux supervisor: cannot start\n"; got.String() != want {
		t.Errorf("the supervisor's stderr reached the writer as %q, want %q", got.String(), want)
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A supervisor started by Prestart, before anything says where its stderr
// goes, has what it wrote by then reach the writer it is given later: the
// logger, which exists only once the config is read.
func TestPrestartedSupervisorStderrReachesTheLaterWriter(t *testing.T) {
	script := filepath.Join(t.TempDir(), "supervisor")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'mcpmux supervisor: cannot start' >&2\nexit 126\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewSpawner(script)
	s.Prestart()
	ts.WaitFor(t, "the supervisor's line to be held", func() bool {
		s.early.mu.Lock()
		defer s.early.mu.Unlock()
		return len(s.early.held) > 0
	})
	var got lockedBuffer
	s.SetSupervisorStderr(&got)
	s.Close()
	if want := "mcpmux supervisor: cannot start\n"; got.String() != want {
		t.Errorf("the supervisor's stderr reached the writer as %q, want %q", got.String(), want)
	}
}

// Prestart starts the supervisor before any child, and the first child is
// forked by that one.
func TestPrestartedSupervisorForksTheFirstChild(t *testing.T) {
	s := supervised(t)
	s.Prestart()
	var pid int
	ts.WaitFor(t, "the supervisor to run", func() bool { pid = s.SupervisorPid(); return pid != 0 })
	p := startT(t, s, Spec{Path: "cat"}) // ends when its stdin closes
	if got := s.SupervisorPid(); got != pid {
		t.Errorf("the child was started by supervisor %d, not the prestarted %d", got, pid)
	}
	if ppid := ts.ParentPid(p.Pid()); ppid != pid {
		t.Errorf("the child's parent is %d, not the prestarted supervisor %d", ppid, pid)
	}
}
