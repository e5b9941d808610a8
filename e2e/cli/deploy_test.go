package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The configs shipped for Docker and Kubernetes must pass validate, so that
// what the README shows actually starts.
func TestShippedConfigsValidate(t *testing.T) {
	t.Parallel()
	bin, _ := ts.Binaries(t)
	root := ts.RepoRoot()

	// Kubernetes: the config and policies live in ConfigMaps of the manifest.
	manifest, err := os.ReadFile(filepath.Join(root, "deploy/kubernetes/mcpmux-sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies")
	if err := os.Mkdir(policies, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.ReplaceAll(literalBlock(t, string(manifest), "mcpmux.toml"), "/etc/mcpmux/policies", policies)
	k8sConfig := filepath.Join(dir, "mcpmux.toml")
	writeTestFile(t, k8sConfig, cfg)
	writeTestFile(t, filepath.Join(policies, "agent.toml"), literalBlock(t, string(manifest), "agent.toml"))

	for _, c := range []struct {
		config string
		env    []string
	}{
		{filepath.Join(root, "config.example.toml"), nil},
		{filepath.Join(root, "deploy/docker/mcpmux.toml"), []string{"READER_TOKEN=t"}},
		{k8sConfig, []string{"AGENT_TOKEN=a", "TICKETS_TOKEN=b"}},
	} {
		cmd := exec.Command(bin, "validate", "--config", c.config)
		cmd.Env = append(os.Environ(), c.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("validate %s: %v\n%s", c.config, err, out)
		}
	}
}

// literalBlock returns the YAML block scalar under "  key: |", dedented.
func literalBlock(t *testing.T, yaml, key string) string {
	t.Helper()
	start := strings.Index(yaml, "  "+key+": |\n")
	if start < 0 {
		t.Fatalf("no %s in the manifest", key)
	}
	var b strings.Builder
	for _, line := range strings.Split(yaml[start+len(key)+6:], "\n") {
		if line != "" && !strings.HasPrefix(line, "    ") {
			break
		}
		b.WriteString(strings.TrimPrefix(line, "    ") + "\n")
	}
	return b.String()
}

func writeTestFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
