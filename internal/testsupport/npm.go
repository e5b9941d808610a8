package testsupport

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NPMServer returns node and the stdio entry point of the reference server
// pkg (under @modelcontextprotocol/, in interop/node_modules after
// `cd interop && npm ci`), whose package names it bin. Without the package
// or node it skips t, or fails it when MCPMUX_NEED_NODE is set (test.sh
// installs the packages first and sets it, so that CI cannot skip these
// tests unseen).
func NPMServer(t testing.TB, pkg, bin string) (node, entry string) {
	t.Helper()
	missing := t.Skipf
	if os.Getenv("MCPMUX_NEED_NODE") != "" {
		missing = t.Fatalf
	}
	dir := filepath.Join(RepoRoot(), "interop", "node_modules")
	var meta struct {
		Bin map[string]string `json:"bin"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "@modelcontextprotocol", pkg, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil || meta.Bin[bin] == "" {
		missing("%s is not installed (cd interop && npm ci): %v", pkg, err)
	}
	entry = filepath.Join(dir, "@modelcontextprotocol", pkg, meta.Bin[bin])
	if node, err = exec.LookPath("node"); err != nil {
		if node = filepath.Join(dir, ".bin", "node"); !fileExists(node) {
			missing("no node to run %s with", pkg)
		}
	}
	return node, entry
}

// EverythingCommand returns node and server-everything's stdio entry point.
func EverythingCommand(t testing.TB) (node, entry string) {
	t.Helper()
	return NPMServer(t, "server-everything", "mcp-server-everything")
}

// FilesystemServer returns a Server table for server-filesystem under alias,
// allowed the directories dirs.
func FilesystemServer(t testing.TB, alias string, dirs ...string) Server {
	t.Helper()
	node, entry := NPMServer(t, "server-filesystem", "mcp-server-filesystem")
	return Server{Alias: alias, Command: node, Args: append([]string{entry}, dirs...), Extra: `startup_timeout = "30s"`}
}

// MemoryServer returns a Server table for server-memory under alias,
// keeping its knowledge graph in file.
func MemoryServer(t testing.TB, alias, file string) Server {
	t.Helper()
	node, entry := NPMServer(t, "server-memory", "mcp-server-memory")
	return Server{Alias: alias, Command: node, Args: []string{entry}, Env: map[string]string{"MEMORY_FILE_PATH": file}, Extra: `startup_timeout = "30s"`}
}
