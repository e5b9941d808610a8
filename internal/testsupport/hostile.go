package testsupport

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	hostileOnce sync.Once
	hostileErr  error
)

// HostileBinary builds the hostile test child (internal/hostile) once per
// test process, next to the binaries of Binaries (and with -race when the
// tests run with it), and returns its path.
func HostileBinary(t testing.TB) string {
	t.Helper()
	Binaries(t) // makes buildDir, which Main removes
	hostileOnce.Do(func() {
		args := []string{"build", "-o", buildDir + "/"}
		if raceBuild {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./internal/hostile")...)
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			hostileErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return filepath.Join(buildDir, "hostile")
}

// AddServer appends a stdio server's table to the lab's config, with the
// environment NewLab gives each labserver.
func (l *Lab) AddServer(t testing.TB, s Server) {
	t.Helper()
	cmd := s.Command
	if cmd == "" {
		_, cmd = Binaries(t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n[servers.%s]\ncommand = %q\n", s.Alias, cmd)
	if len(s.Args) > 0 {
		fmt.Fprintf(&b, "args = %s\n", tomlList(s.Args))
	}
	env := map[string]string{"LAB_SOURCE": s.Alias, "LAB_NOTES": l.Notes + "." + s.Alias, "LAB_STARTED_DIR": l.Started}
	maps.Copy(env, s.Env)
	writeInlineTable(&b, "env", env)
	writeServerTail(&b, s.Hide, s.ReadOnly, s.Extra)
	f, err := os.OpenFile(l.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
