package childproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The test binary is also the supervisor, as mcpmux is, and a stand-in
// for mcpmux (see runFakeMux).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SupervisorArg {
		os.Exit(RunSupervisor())
	}
	if len(os.Args) > 1 && os.Args[1] == fakeMuxArg {
		os.Exit(runFakeMux(os.Args[2:]))
	}
	os.Exit(m.Run())
}

const wait = 15 * time.Second

// modes runs a test with children started directly and by a supervisor.
func modes(t *testing.T, f func(t *testing.T, s *Spawner)) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ name, supervisor string }{{"direct", ""}, {"supervised", self}} {
		t.Run(m.name, func(t *testing.T) {
			s := NewSpawner(m.supervisor)
			t.Cleanup(s.Close)
			f(t, s)
		})
	}
}

// startT starts spec and stops it (and checks it is gone) at cleanup.
func startT(t *testing.T, s *Spawner, spec Spec) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p, err := s.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		p.Stop(ctx)
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still there after Stop: %v", p.Pid(), err)
		}
	})
	return p
}

// status starts `cat /proc/self/status` as spec says and returns the
// Uid, Gid, Groups and NoNewPrivs lines, fields joined by one space.
func status(t *testing.T, s *Spawner, spec Spec) map[string]string {
	t.Helper()
	spec.Path, spec.Args = "cat", []string{"/proc/self/status"}
	p := startT(t, s, spec)
	b, err := io.ReadAll(p.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ExitErr(); err != nil {
		t.Fatalf("cat: %v; stdout %q", err, b)
	}
	return statusFields(string(b))
}

func statusFields(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(s) {
		k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
		switch k {
		case "Uid", "Gid", "Groups", "NoNewPrivs":
			out[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return out
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it starts children as other users")
	}
}

func nobody(t *testing.T) (uid, gid string) {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	return u.Uid, u.Gid
}

// all4 is the Uid or Gid line of a process whose real, effective, saved and
// filesystem ids are all id.
func all4(id string) string { return strings.Repeat(id+" ", 3) + id }

func TestChildInheritsWithoutUser(t *testing.T) {
	own, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	want := statusFields(string(own))
	modes(t, func(t *testing.T, s *Spawner) {
		if got := status(t, s, Spec{}); !maps.Equal(got, want) {
			t.Errorf("child status %v, want the test's own %v", got, want)
		}
	})
}

func TestChildRunsAsOtherUser(t *testing.T) {
	needRoot(t)
	uid, gid := nobody(t)
	cases := []struct {
		name        string
		user, group string
		want        map[string]string
	}{
		{"name", "nobody", "", map[string]string{"Uid": all4(uid), "Gid": all4(gid), "Groups": "", "NoNewPrivs": "1"}},
		{"numeric user and group", "12345", "23456", map[string]string{"Uid": all4("12345"), "Gid": all4("23456"), "Groups": "", "NoNewPrivs": "1"}},
		{"group alone", "", gid, map[string]string{"Uid": all4("0"), "Gid": all4(gid), "Groups": "", "NoNewPrivs": "1"}},
		// Already who it is to be: nothing to switch, but no_new_privs all the same.
		{"own user", "root", "", map[string]string{"Uid": all4("0"), "Gid": all4("0"), "NoNewPrivs": "1"}},
	}
	modes(t, func(t *testing.T, s *Spawner) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got := status(t, s, Spec{User: c.user, Group: c.group})
				for k, v := range c.want {
					if got[k] != v {
						t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
					}
				}
			})
		}
	})
}

// The pipes work across the switch, both ways, and Stop still takes down
// the child and what it started even though they run as another user.
func TestOtherUserPipesAndStop(t *testing.T) {
	needRoot(t)
	nobody(t)
	modes(t, func(t *testing.T, s *Spawner) {
		p := startT(t, s, Spec{Path: "sh", Args: []string{"-c", "sleep 1000 & echo $!; exec cat"}, User: "nobody"})
		out := bufio.NewReader(p.Stdout)
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var grandchild int
		if _, err := fmt.Sscan(line, &grandchild); err != nil {
			t.Fatalf("grandchild pid %q: %v", line, err)
		}
		if _, err := io.WriteString(p.Stdin, "ping\n"); err != nil {
			t.Fatal(err)
		}
		if echo, err := out.ReadString('\n'); err != nil || echo != "ping\n" {
			t.Fatalf("echo %q, %v", echo, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		p.Stop(ctx)
		// Its new parent reaps it in its own time.
		ts.WaitFor(t, "the grandchild to die with its group", func() bool { return !ts.Alive(grandchild) })
	})
}

func TestUserErrors(t *testing.T) {
	s := NewSpawner("")
	defer s.Close()
	cases := []struct{ user, group, want string }{
		{"no-such-user-x", "", "user no-such-user-x: user: unknown user no-such-user-x"},
		{"", "no-such-group-x", "group no-such-group-x: group: unknown group no-such-group-x"},
		{"54321", "", "user 54321: not in the user database, so it has no group: set group too"},
	}
	for _, c := range cases {
		_, err := s.Start(context.Background(), Spec{Path: "true", User: c.user, Group: c.group})
		if err == nil || err.Error() != c.want {
			t.Errorf("user %q group %q: err %v, want %q", c.user, c.group, err, c.want)
		}
	}
}

// Without root, another user is refused before anything is started; as
// root there is nothing to refuse (e2e runs mcpmux as nobody to check it).
func TestOtherUserNeedsRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root: see e2e TestUserSwitchNeedsRoot")
	}
	s := NewSpawner("")
	defer s.Close()
	_, err := s.Start(context.Background(), Spec{Path: "true", User: "root"})
	if !errors.Is(err, ErrNotRoot) || err.Error() != "user root: mcpmux must run as root to start a child as another user" {
		t.Fatalf("err %v", err)
	}
}

func TestUserEnviron(t *testing.T) {
	parent := []string{"PATH=/bin", "HOME=/root", "USER=root", "LANG=C"}
	if got := UserEnviron(parent, ""); !slices.Equal(got, parent) {
		t.Errorf("no user: %v", got)
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	for _, spec := range []string{"nobody", u.Uid} {
		want := []string{"PATH=/bin", "LANG=C", "HOME=" + u.HomeDir, "USER=nobody"}
		if got := UserEnviron(parent, spec); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", spec, got, want)
		}
	}
	if got := UserEnviron(parent, "54321"); !slices.Equal(got, []string{"PATH=/bin", "LANG=C"}) {
		t.Errorf("unknown id: %v", got)
	}
	if parent[1] != "HOME=/root" {
		t.Error("UserEnviron changed its argument")
	}
}

func TestProtectSelf(t *testing.T) {
	// The test process is left non-dumpable; nothing here needs a dump.
	if err := ProtectSelf(); err != nil {
		t.Fatal(err)
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Fatalf("dumpable = %d, %v", d, err)
	}
}
