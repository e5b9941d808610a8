package childproc

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// A spawn handed to a forker just before the lifeline ended forks nothing
// once killGroups has run: a child forked after it would never be killed.
// The supervisor's state runs in the test process here, its messages kept.
func TestNoForkAfterKillGroups(t *testing.T) {
	var mu sync.Mutex
	var sent [][]byte
	s := &supervisor{groups: map[uint64]group{}, out: newOutbox(func(b, _ []byte) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, b)
		return nil
	})}
	defer s.out.close(ErrSupervisorGone)
	path, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	var files []*os.File
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		files = append(files, w)
	}
	s.killGroups()
	j := spawnJob{req: supRequest{Op: "spawn", ID: 1, Path: path, Args: []string{"1000"}}, files: files}
	if s.forkJob(j, nil) {
		for _, g := range s.groups {
			_ = g.signal(syscall.SIGKILL)
			_, _ = syscall.Wait4(g.pgid, nil, 0, nil)
		}
		t.Fatal("forked a child after killGroups")
	}
	if _, err := files[0].Write([]byte("x")); err == nil {
		t.Error("the job's descriptors were left open")
	}
	s.out.close(ErrSupervisorGone)
	if len(sent) != 0 || len(s.groups) != 0 {
		t.Errorf("sent %q, groups %v", sent, s.groups)
	}
}
