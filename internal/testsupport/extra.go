package testsupport

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// extraBinary is a test child built on first use, once per test process,
// next to the binaries of Binaries.
type extraBinary struct {
	pkg   string       // package path below the repository, e.g. "./internal/hostile"
	race  bool         // built with -race when the tests run with it
	after func() error // run once the build succeeded; nil for none
	once  sync.Once
	err   error
}

func (b *extraBinary) path(t testing.TB) string {
	t.Helper()
	Binaries(t) // makes buildDir, which Main removes
	b.once.Do(func() {
		args := []string{"build", "-o", buildDir + "/"}
		if b.race && raceBuild {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, b.pkg)...)
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
			return
		}
		if b.after != nil {
			b.err = b.after()
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return filepath.Join(buildDir, filepath.Base(b.pkg))
}
