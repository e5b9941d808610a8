package testsupport

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// procpeek is built without -race: it runs as other users, and only reads.
var procpeek = &extraBinary{pkg: "./internal/procpeek", after: func() error { return os.Chmod(buildDir, 0o711) }}

// ProcpeekBinary builds the isolation test child (internal/procpeek) once
// per test process, next to the binaries of Binaries, and returns its path.
// The binaries' directory is opened for others to traverse (not to list),
// so that mcpmux and its children can run as other users.
func ProcpeekBinary(t testing.TB) string {
	t.Helper()
	return procpeek.path(t)
}

// OpenLab lets every user read the lab's directory and the test's temporary
// directory above it, so that mcpmux running as another user can read its
// config and policies.
func OpenLab(t testing.TB, lab *Lab) {
	t.Helper()
	for _, d := range []string{lab.Dir, filepath.Dir(lab.Dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// StartMuxWith is StartMux with prep applied to the command before it
// starts (to give it an environment or credentials of its own).
func StartMuxWith(t testing.TB, lab *Lab, prep func(*exec.Cmd), args ...string) *Mux {
	t.Helper()
	return startMux(t, lab, mcp.LATEST_LEGACY_PROTOCOL_VERSION, prep, args)
}
