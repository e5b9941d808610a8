package isolation

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// peekReport is procpeek's answer (internal/procpeek).
type peekReport struct {
	Pid    int
	Ppid   int
	Status map[string]string
	Reads  map[string]struct{ Data, Error string }
}

func peekAt(t *testing.T, m *ts.Mux, alias string, paths ...string) peekReport {
	t.Helper()
	res := m.MustCall(alias+"__peek", map[string]any{"paths": append([]string{}, paths...)})
	if res.IsError {
		t.Fatalf("%s__peek: %s", alias, ts.Text(res))
	}
	var r peekReport
	if err := json.Unmarshal([]byte(ts.Text(res)), &r); err != nil {
		t.Fatalf("%s__peek: %v", alias, err)
	}
	return r
}

func procFile(pid int, name string) string { return fmt.Sprintf("/proc/%d/%s", pid, name) }

// denied checks that reading path failed for want of permission.
func denied(t *testing.T, r peekReport, path string) {
	t.Helper()
	got := r.Reads[path]
	if got.Data != "" || !strings.Contains(got.Error, "permission denied") {
		t.Errorf("%s: read %d bytes, error %q; want permission denied", path, len(got.Data), got.Error)
	}
}

// ids4 is a /proc status Uid or Gid line whose real, effective, saved and
// filesystem ids are all id.
func ids4(id string) string { return strings.Repeat(id+" ", 3) + id }

func lookupNobody(t *testing.T) *user.User {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	return u
}

// unprivileged makes cmd run as nobody when the tests run as root, so that
// mcpmux and its children share a user that has no power over others'
// processes: the case non-dumpability is for. Otherwise the tests' own user
// already is such a user.
func unprivileged(t *testing.T, lab *ts.Lab) func(*exec.Cmd) {
	t.Helper()
	if os.Geteuid() != 0 {
		return func(*exec.Cmd) {}
	}
	u := lookupNobody(t)
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	ts.OpenLab(t, lab)
	return func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	}
}

// A child running as mcpmux's own user cannot read mcpmux's environment or
// memory through /proc, nor its supervisor's, while it can read its own and,
// as a control, a sibling child's.
func TestChildCannotReadMuxOrSupervisor(t *testing.T) {
	t.Parallel()
	peek := ts.ProcpeekBinary(t)
	lab := ts.NewLab(t, "",
		ts.Server{Alias: "a", Command: peek, Env: map[string]string{"PEEK_MARK": "mark-a"}},
		ts.Server{Alias: "b", Command: peek, Env: map[string]string{"PEEK_MARK": "mark-b"}},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	const secret = "MCPMUX_TEST_SECRET=upstream-token-3f9a"
	asUser := unprivileged(t, lab)
	m := ts.StartMuxWith(t, lab, func(cmd *exec.Cmd) {
		cmd.Env = append(os.Environ(), secret)
		asUser(cmd)
	})
	mcpmux := m.Cmd.Process.Pid
	if os.Geteuid() == 0 {
		// Root still may: the secret is there to be read.
		if b, err := os.ReadFile(procFile(mcpmux, "environ")); err != nil || !strings.Contains(string(b), secret) {
			t.Fatalf("mcpmux's environ as root: %v, holds the secret: %v", err, strings.Contains(string(b), secret))
		}
	}

	b := peekAt(t, m, "b")
	supervisor := peekAt(t, m, "a").Ppid
	if supervisor == mcpmux {
		t.Fatal("a runs without a supervisor")
	}
	paths := []string{
		procFile(mcpmux, "environ"), procFile(mcpmux, "mem"),
		procFile(supervisor, "environ"), procFile(supervisor, "mem"),
		procFile(b.Pid, "environ"), "/proc/self/environ",
	}
	a := peekAt(t, m, "a", paths...)
	if want := ids4(strconv.Itoa(os.Geteuid())); os.Geteuid() != 0 && a.Status["Uid"] != want {
		t.Fatalf("a runs as %q, want mcpmux's own %q", a.Status["Uid"], want)
	}
	for _, p := range paths[:4] {
		denied(t, a, p)
	}
	if got := a.Reads["/proc/self/environ"]; !strings.Contains(got.Data, "PEEK_MARK=mark-a") {
		t.Errorf("a cannot read its own environ: %+v", got)
	}
	// Children of one user can read each other: the denials above are
	// mcpmux's and the supervisor's doing, not the test's.
	if got := a.Reads[procFile(b.Pid, "environ")]; !strings.Contains(got.Data, "PEEK_MARK=mark-b") {
		t.Errorf("control: a cannot read its sibling's environ: %+v", got)
	}
	for p, r := range a.Reads {
		if strings.Contains(r.Data, secret) {
			t.Errorf("%s leaked mcpmux's secret", p)
		}
	}
}

// With user = "nobody", a child runs as nobody, in nobody's group only,
// with no_new_privs, and with nobody's HOME and USER; a child without user
// runs as mcpmux's. Neither the nobody child nor anything it started
// survives mcpmux's SIGKILL.
func TestChildRunsAsConfiguredUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mcpmux starts a child as another user only as root")
	}
	nobody := lookupNobody(t)
	peek := ts.ProcpeekBinary(t)
	lab := ts.NewLab(t, "",
		ts.Server{Alias: "confined", Command: peek, Extra: `user = "nobody"`},
		ts.Server{Alias: "plain", Command: peek},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMux(t, lab)
	mcpmux := m.Cmd.Process.Pid

	supervisor := peekAt(t, m, "confined").Ppid
	paths := []string{procFile(mcpmux, "environ"), procFile(mcpmux, "mem"), procFile(supervisor, "environ"), procFile(supervisor, "mem"), "/proc/self/environ"}
	c := peekAt(t, m, "confined", paths...)
	want := map[string]string{"Uid": ids4(nobody.Uid), "Gid": ids4(nobody.Gid), "Groups": "", "NoNewPrivs": "1"}
	for k, v := range want {
		if c.Status[k] != v {
			t.Errorf("confined: %s = %q, want %q", k, c.Status[k], v)
		}
	}
	for _, p := range paths[:4] {
		denied(t, c, p)
	}
	env := c.Reads["/proc/self/environ"].Data
	for _, kv := range []string{"HOME=" + nobody.HomeDir, "USER=nobody"} {
		if !strings.Contains(env, kv+"\x00") {
			t.Errorf("confined's environment lacks %s: %q", kv, env)
		}
	}
	p := peekAt(t, m, "plain")
	if p.Status["Uid"] != ids4("0") || p.Status["NoNewPrivs"] != "0" {
		t.Errorf("plain: %v, want root's ids and no no_new_privs", p.Status)
	}

	pids := append([]int{c.Pid, p.Pid}, m.Log.ChildPids()...) // the children as mcpmux reported them
	for _, alias := range []string{"confined", "plain"} {
		pids = append(pids, ts.Grandchild(t, m, alias))
	}
	ts.SigkillLeavesNothing(t, m, pids)
}

// mcpmux not running as root refuses to start a child as another user,
// saying why, and keeps the others; the config itself is valid, since who
// mcpmux runs as is a property of where it runs.
func TestUserSwitchNeedsRoot(t *testing.T) {
	t.Parallel()
	peek := ts.ProcpeekBinary(t)
	lab := ts.NewLab(t, "",
		ts.Server{Alias: "other", Command: peek, Extra: `user = "root"`},
		ts.Server{Alias: "fine", Command: peek},
	)
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	m := ts.StartMuxWith(t, lab, unprivileged(t, lab))
	line := m.Log.WaitLine(t, "start failure", ts.Msg("server failed to start", "server", "other"))
	if want := "server other: user root: mcpmux must run as root to start a child as another user"; line["error"] != want {
		t.Errorf("error %q, want %q", line["error"], want)
	}
	if got := peekAt(t, m, "fine"); got.Pid == 0 {
		t.Error("fine did not answer")
	}

	bin, _ := ts.Binaries(t)
	out, err := exec.Command(bin, "validate", "--config", lab.Config).CombinedOutput()
	if err != nil {
		t.Errorf("validate: %v\n%s", err, out)
	}
}
