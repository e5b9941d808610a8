package testsupport

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Settles polls cond until it holds or Wait passes, and reports whether it
// came to hold: WaitFor's loop, for a test that goes on to report more
// after (the goroutines left, say) rather than failing at once.
func Settles(cond func() bool) bool {
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// RSS returns a process's resident set size in bytes (VmRSS).
func RSS(pid int) (int64, error) { return procStatusBytes(pid, "VmRSS") }

// PeakRSS returns the largest resident set size a process has had, in
// bytes (VmHWM).
func PeakRSS(pid int) (int64, error) { return procStatusBytes(pid, "VmHWM") }

// procStatusBytes reads a field given in kB from /proc/<pid>/status.
func procStatusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pid %d: %s %q: %w", pid, field, rest, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("pid %d: no %s in /proc/%d/status", pid, field, pid)
}

// ProcChildren returns the pids of a process's children, as the kernel
// lists them for each of its threads. A process that is gone has none.
func ProcChildren(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, path := range tasks {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// Cmdline returns a process's arguments; nil when it is gone. With it a
// test makes sure a pid it is about to signal or count is still the process
// it means, not a newcomer that reused the number.
func Cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}
