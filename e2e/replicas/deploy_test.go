package replicas

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The replicas' Kubernetes manifest holds a config that validate accepts,
// with its [replicas] section, as the pod's environment gives it.
func TestReplicasManifestValidates(t *testing.T) {
	t.Parallel()
	bin, _ := ts.Binaries(t)
	manifest, err := os.ReadFile(filepath.Join(ts.RepoRoot(), "deploy/kubernetes/mcpmux-replicas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"policies", "pins"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := block(t, string(manifest), "mcpmux.toml")
	if !strings.Contains(cfg, "[replicas]") {
		t.Fatal("the manifest's config has no [replicas]")
	}
	cfg = strings.NewReplacer("/etc/mcpmux/policies", filepath.Join(dir, "policies"), "/etc/mcpmux/pins", filepath.Join(dir, "pins")).Replace(cfg)
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "mcpmux.toml"), cfg)
	write(filepath.Join(dir, "policies", "agent.toml"), block(t, string(manifest), "agent.toml"))
	cmd := exec.Command(bin, "validate", "--config", filepath.Join(dir, "mcpmux.toml"))
	cmd.Env = append(os.Environ(), "AGENT_TOKEN=a", "POD_IP=10.0.0.7")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("validate: %v\n%s", err, out)
	}
}

// block returns the YAML block scalar under "  key: |", dedented.
func block(t *testing.T, yaml, key string) string {
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
