package soak

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The identities of the soak and what their policies grant. Only writer's
// grant changes: it alternates between everything and read-only tools.
const (
	grantAll      = `allow = ["*"]`
	grantReadOnly = `allow_read_only = ["*"]`
)

var staticPolicies = map[string]string{
	"reader":  grantAll,
	"auditor": grantReadOnly,
}

// The ways writer's policy file is rewritten, in the order they take turns:
// a rename leaves a regular file for the edit in place, and a ConfigMap swap
// turns the file back into a symlink for the next rename to replace.
var editModes = []string{"rename", "in place", "configmap"}

// policyDir is a policy directory laid out as kubelet mounts a ConfigMap
// (a ..data symlink to a timestamped directory, and one symlink per file
// through ..data), whose writer.toml is also saved in place and by rename.
// Only its editor goroutine uses it.
type policyDir struct {
	dir        string
	gen        int    // of the current ConfigMap directory
	data       string // its name
	writerFull bool
	edits      map[string]int // by mode
	log        []edit
}

type edit struct {
	at   time.Time
	mode string
	full bool // writer's new grant
}

func newPolicyDir(dir string) (*policyDir, error) {
	p := &policyDir{dir: dir, writerFull: true, edits: map[string]int{}}
	return p, p.swap()
}

// edit is the n-th edit (from 0): it flips writer's grant and saves it the
// n-th mode's way.
func (p *policyDir) edit(n int) error {
	p.writerFull = !p.writerFull
	mode := editModes[n%len(editModes)]
	path := filepath.Join(p.dir, "writer.toml")
	var err error
	switch mode {
	case "rename":
		tmp := filepath.Join(p.dir, ".writer.tmp")
		if err = os.WriteFile(tmp, []byte(p.writer()), 0o644); err == nil {
			err = os.Rename(tmp, path)
		}
	case "in place":
		err = overwrite(path, p.writer())
	case "configmap":
		err = p.swap()
	}
	if err != nil {
		return fmt.Errorf("policy edit %d (%s): %w", n, mode, err)
	}
	p.edits[mode]++
	p.log = append(p.log, edit{at: time.Now(), mode: mode, full: p.writerFull})
	return nil
}

func (p *policyDir) writer() string {
	g := grantReadOnly
	if p.writerFull {
		g = grantAll
	}
	// One length for both grants, for overwrite.
	return fmt.Sprintf("%-32s\n", g)
}

// overwrite rewrites a file in place with data of the same length, without
// truncating it first. A truncating save would let a reload that falls
// between the truncation and the write read an empty file, which is a
// valid policy that grants nothing: the file's content at that moment, not
// mcpmux's doing, and a refusal the soak could not tell from a real one.
func overwrite(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt([]byte(data), 0)
	if err := f.Close(); werr == nil {
		werr = err
	}
	return werr
}

// swap publishes every policy file as a ConfigMap update does: a new
// directory, a ..data_tmp symlink to it renamed over ..data, then the old
// directory removed. A visible file that is not (or no longer) a symlink
// through ..data becomes one.
func (p *policyDir) swap() error {
	p.gen++
	old, name := p.data, fmt.Sprintf("..soak_%04d", p.gen)
	if err := os.Mkdir(filepath.Join(p.dir, name), 0o755); err != nil {
		return err
	}
	files := map[string]string{"writer.toml": p.writer()}
	for id, body := range staticPolicies {
		files[id+".toml"] = body
	}
	for file, body := range files {
		if err := os.WriteFile(filepath.Join(p.dir, name, file), []byte(body), 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(p.dir, "..data_tmp")
	if err := os.Symlink(name, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, "..data")); err != nil {
		return err
	}
	p.data = name
	for file := range files {
		path := filepath.Join(p.dir, file)
		fi, err := os.Lstat(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			continue
		}
		link := filepath.Join(p.dir, "."+file+".link")
		if err := os.Symlink("..data/"+file, link); err != nil {
			return err
		}
		if err := os.Rename(link, path); err != nil {
			return err
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(p.dir, old))
	}
	return nil
}

// lastEdit describes the last edit before t, for a failure message.
func (p *policyDir) lastEdit(t time.Time) string {
	for i := len(p.log) - 1; i >= 0; i-- {
		if e := p.log[i]; !e.at.After(t) {
			return fmt.Sprintf(" (the last policy edit before its answer: %s, %s before, writer's grant full=%v)", e.mode, t.Sub(e.at).Round(time.Millisecond), e.full)
		}
	}
	return ""
}
