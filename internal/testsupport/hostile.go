package testsupport

import (
	"fmt"
	"os/exec"
	"path/filepath"
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
