package testsupport

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// FilesystemServer returns a Server table for @modelcontextprotocol/
// server-filesystem (interop/node_modules, after `cd interop && npm ci`)
// under alias, allowed the directories dirs, skipping t when it or node is
// missing.
func FilesystemServer(t testing.TB, alias string, dirs ...string) Server {
	t.Helper()
	dir := filepath.Join(RepoRoot(), "interop", "node_modules")
	var pkg struct {
		Bin map[string]string `json:"bin"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "@modelcontextprotocol", "server-filesystem", "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &pkg)
	}
	if err != nil || pkg.Bin["mcp-server-filesystem"] == "" {
		t.Skipf("server-filesystem is not installed (cd interop && npm ci): %v", err)
	}
	entry := filepath.Join(dir, "@modelcontextprotocol", "server-filesystem", pkg.Bin["mcp-server-filesystem"])
	node, err := exec.LookPath("node")
	if err != nil {
		if node = filepath.Join(dir, ".bin", "node"); !fileExists(node) {
			t.Skip("no node to run server-filesystem with")
		}
	}
	return Server{Alias: alias, Command: node, Args: append([]string{entry}, dirs...), Extra: `startup_timeout = "30s"`}
}
