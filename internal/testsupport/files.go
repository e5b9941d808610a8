package testsupport

import (
	"os"
	"path/filepath"
	"testing"
)

// ReplaceFile writes data to path by renaming a new file over it, as
// editors and deployment tools do, so that no reader sees it half-written.
func ReplaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
