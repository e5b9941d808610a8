package testsupport

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StartAsPid starts `sleep 1000` as the leader of its own process group
// with process id pid, which must be free, by setting the kernel's last
// allocated pid just below it (root only: the test is skipped otherwise).
// Another process of the system may take pid first (the e2e packages fork
// hundreds a second beside this one), so it tries again until Wait has
// passed. The process is killed and reaped at cleanup.
func StartAsPid(t testing.TB, pid int) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it sets /proc/sys/kernel/ns_last_pid")
	}
	deadline := time.Now().Add(Wait)
	for tries := 1; ; tries++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot choose the next pid: %v", err)
		}
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			return cmd
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if time.Now().After(deadline) {
			t.Fatalf("pid %d was taken by another process in each of %d tries", pid, tries)
		}
	}
}

// KilledBy says how cmd, started by StartAsPid, ended once sent SIGTERM:
// the signal that killed it (SIGKILL if another had been sent before).
func KilledBy(t testing.TB, cmd *exec.Cmd) syscall.Signal {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("pid %d: %v, want killed by a signal", cmd.Process.Pid, err)
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		t.Fatalf("pid %d: %v, want killed by a signal", cmd.Process.Pid, err)
	}
	return ws.Signal()
}
