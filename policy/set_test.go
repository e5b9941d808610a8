package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	// A Kubernetes ConfigMap mount: the visible file is a symlink through
	// ..data to a timestamped directory.
	mkdir(t, filepath.Join(dir, "..2026_01"))
	writeFile(t, filepath.Join(dir, "..2026_01", "writer.toml"), `allow = ["docs__*"]`)
	symlink(t, "..2026_01", filepath.Join(dir, "..data"))
	symlink(t, "..data/writer.toml", filepath.Join(dir, "writer.toml"))

	writeFile(t, filepath.Join(dir, "reader.toml"), `allow_read_only = ["*"]`)
	writeFile(t, filepath.Join(dir, "empty.toml"), "")
	writeFile(t, filepath.Join(dir, "broken.toml"), "allow = []\n\ndeny = [\"\"]\n")
	writeFile(t, filepath.Join(dir, ".hidden.toml"), `allow = ["*"]`)
	writeFile(t, filepath.Join(dir, ".reader.toml.swp"), "junk")
	writeFile(t, filepath.Join(dir, "notes.txt"), "junk")
	writeFile(t, filepath.Join(dir, "admin.toml~"), `allow = ["*"]`)
	mkdir(t, filepath.Join(dir, "subdir.toml"))
	symlink(t, "subdir.toml", filepath.Join(dir, "linkdir.toml"))
	symlink(t, "nowhere.toml", filepath.Join(dir, "dangling.toml"))
	fifo := filepath.Join(dir, "fifo.toml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}

	set, errs := LoadDir(dir)
	if got, want := set.Identities(), []string{"empty", "reader", "writer"}; !slices.Equal(got, want) {
		t.Errorf("Identities = %q; want %q", got, want)
	}
	if set.Generation() != 1 {
		t.Errorf("Generation = %d; want 1", set.Generation())
	}
	if p := set.For("writer"); p == nil || !p.Allows(tool("docs__x", false)) || p.File != filepath.Join(dir, "writer.toml") {
		t.Errorf("For(writer) = %+v; want the policy read through the symlinks", p)
	}
	if p := set.For("empty"); p == nil || p.Allows(tool("docs__x", true)) {
		t.Errorf("For(empty) = %v; want a policy that allows nothing", p)
	}
	if p := set.For("broken"); p != nil {
		t.Errorf("For(broken) = %v; want nil", p)
	}

	var msgs []string
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	slices.Sort(msgs)
	want := []string{
		filepath.Join(dir, "broken.toml") + ":3: empty pattern in deny",
		"policy: " + fifo + ": not a regular file",
	}
	if !slices.Equal(msgs, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
}

func TestLoadDirMissing(t *testing.T) {
	set, errs := LoadDir(filepath.Join(t.TempDir(), "missing"))
	if set != nil || len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Errorf("LoadDir = %v, %v; want nil and one not-exist error", set, errs)
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	if s.For("reader") != nil || s.Generation() != 0 || s.Identities() != nil {
		t.Error("nil Set is not empty")
	}
}

func TestIdentitiesIsACopy(t *testing.T) {
	s := newSet(1, map[string]*Policy{"b": mustParse(t, "b", ""), "a": mustParse(t, "a", "")})
	ids := s.Identities()
	ids[0] = "z"
	if got := s.Identities(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Identities after modifying a copy = %q", got)
	}
}

func TestChanged(t *testing.T) {
	sets := func(files map[string]string) *Set {
		m := make(map[string]*Policy)
		for id, data := range files {
			m[id] = mustParse(t, id, data)
		}
		return newSet(1, m)
	}
	tests := []struct {
		name     string
		old, new *Set
		want     []string
	}{
		{name: "nil to nil"},
		{name: "nil to some", new: sets(map[string]string{"b": "", "a": ""}), want: []string{"a", "b"}},
		{name: "some to nil", old: sets(map[string]string{"a": ""}), want: []string{"a"}},
		{
			name: "same rules written differently",
			old:  sets(map[string]string{"a": `allow = ["x", "y"]`}),
			new:  sets(map[string]string{"a": "# reordered\nallow = [\n 'y',\n 'x',\n 'x',\n]\ndeny = []\n"}),
		},
		{
			name: "rule moved to another key",
			old:  sets(map[string]string{"a": `allow = ["x"]`}),
			new:  sets(map[string]string{"a": `allow_read_only = ["x"]`}),
			want: []string{"a"},
		},
		{
			name: "only allow_resources changed",
			old:  sets(map[string]string{"a": "allow = [\"x\"]\nallow_resources = [\"docs\"]\n"}),
			new:  sets(map[string]string{"a": "allow = [\"x\"]\nallow_resources = [\"docs\", \"tick*\"]\n"}),
			want: []string{"a"},
		},
		{
			name: "allow_resources written differently",
			old:  sets(map[string]string{"a": `allow_resources = ["tick*", "docs"]`}),
			new:  sets(map[string]string{"a": "allow_resources = [\n  'docs',\n  \"tick*\",\n  'docs',\n]\n"}),
		},
		{
			name: "a name moved from allow to allow_resources",
			old:  sets(map[string]string{"a": `allow = ["docs"]`}),
			new:  sets(map[string]string{"a": `allow_resources = ["docs"]`}),
			want: []string{"a"},
		},
		{
			name: "empty policy is not no policy",
			old:  sets(map[string]string{}),
			new:  sets(map[string]string{"a": ""}),
			want: []string{"a"},
		},
		{
			name: "added, removed, changed, unchanged",
			old:  sets(map[string]string{"changed": `deny = ["x"]`, "removed": "", "same": `allow = ["*"]`}),
			new:  sets(map[string]string{"changed": `deny = ["y"]`, "added": "", "same": `allow = ["*"]`}),
			want: []string{"added", "changed", "removed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Changed(tt.old, tt.new); !slices.Equal(got, tt.want) {
				t.Errorf("Changed = %q; want %q", got, tt.want)
			}
		})
	}
}

func mustParse(t testing.TB, identity, data string) *Policy {
	t.Helper()
	p, err := Parse(identity+ext, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdir(t testing.TB, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
