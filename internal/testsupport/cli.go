package testsupport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// CLIResult is how one run of the binary ended.
type CLIResult struct {
	Stdout, Stderr string
	Code           int
}

var labserverReady = regexp.MustCompile(`labserver \S+ pid (\d+) ready`)

// RunCLI runs mcpmux with args and waits for it to exit. Every child it
// reported starting (each labserver, by mcpmux's log and its own) must be
// gone once it has.
func RunCLI(t testing.TB, args ...string) CLIResult {
	t.Helper()
	return RunCLIStdin(t, "", args...)
}

// RunCLIStdin is RunCLI with stdin as mcpmux's standard input.
func RunCLIStdin(t testing.TB, stdin string, args ...string) CLIResult {
	t.Helper()
	return RunCLIIn(t, "", stdin, args...)
}

// RunCLIIn is RunCLIStdin in the working directory dir ("": the test's).
func RunCLIIn(t testing.TB, dir, stdin string, args ...string) CLIResult {
	t.Helper()
	bin, _ := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mcpmux %s did not exit\nstderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	if err != nil {
		if _, ok := errors.AsType[*exec.ExitError](err); !ok {
			t.Fatalf("mcpmux %s: %v", strings.Join(args, " "), err)
		}
	}
	r := CLIResult{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
	for _, pid := range CLIChildPids(r.Stderr) {
		WaitFor(t, fmt.Sprintf("child pid %d to be gone after mcpmux %s exited", pid, args[0]), func() bool { return !Alive(pid) })
	}
	return r
}

// CLIChildPids reads the pids of the children a run started from its log.
func CLIChildPids(stderr string) []int {
	var pids []int
	for line := range strings.Lines(stderr) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		if pid, ok := l["pid"].(float64); ok && l["message"] == "server ready" {
			pids = append(pids, int(pid))
		}
		if m := labserverReady.FindStringSubmatch(fmt.Sprint(l["stderr"])); m != nil {
			pid, _ := strconv.Atoi(m[1])
			pids = append(pids, pid)
		}
	}
	return pids
}
