package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Set is an immutable snapshot of every identity's policy. It is never
// modified after creation, so it may be read from any goroutine without
// locking. A nil *Set is an empty set.
type Set struct {
	gen        uint64
	policies   map[string]*Policy
	identities []string // sorted keys of policies
}

func newSet(gen uint64, policies map[string]*Policy) *Set {
	return &Set{
		gen:        gen,
		policies:   policies,
		identities: slices.Sorted(maps.Keys(policies)),
	}
}

// For returns identity's policy, or nil if it has none, which means it has
// no access.
func (s *Set) For(identity string) *Policy {
	if s == nil {
		return nil
	}
	return s.policies[identity]
}

// Generation numbers the set among those a Store publishes: every set it
// publishes has a higher generation than the one before, and it publishes a
// set only when some policy changed, or some rule moved to another line. A
// Set from LoadDir has generation 1; a nil Set, 0.
func (s *Set) Generation() uint64 {
	if s == nil {
		return 0
	}
	return s.gen
}

// Identities returns, sorted, the identities that have a policy.
func (s *Set) Identities() []string {
	return slices.Clone(s.ids())
}

// ids is Identities without the copy, for use inside the package.
func (s *Set) ids() []string {
	if s == nil {
		return nil
	}
	return s.identities
}

// Changed reports, sorted, the identities whose policy differs between old
// and new: added, removed, or granting different access. Either set may be
// nil. A policy file rewritten with the same rules (say, a new comment) is
// not a change.
func Changed(old, new *Set) []string {
	var changed []string
	for _, id := range old.ids() {
		if !old.For(id).sameAccess(new.For(id)) {
			changed = append(changed, id)
		}
	}
	for _, id := range new.ids() {
		if old.For(id) == nil {
			changed = append(changed, id)
		}
	}
	slices.Sort(changed)
	return changed
}

// LoadDir reads every policy file in dir: each file named IDENTITY.toml,
// following symbolic links, as in a Kubernetes ConfigMap mount. Dotfiles and
// directories are ignored.
//
// Problems are reported per file, and the files that parse are in the Set.
// If dir itself cannot be read, LoadDir returns a nil Set (which is empty)
// and that one error.
func LoadDir(dir string) (*Set, []error) {
	set, problems, err := load(dir, nil, 1)
	if err != nil {
		return nil, []error{err}
	}
	var errs []error
	for _, p := range problems {
		errs = append(errs, p.err)
	}
	return set, errs
}

// A problem is a policy file that could not be loaded.
type problem struct {
	file string
	err  error
	kept bool // whether the identity kept its previous policy
}

// load reads the policies in dir. An identity whose file cannot be read or
// parsed keeps its policy in prev, if it has one: a save caught half-way or
// a typo must not revoke access, let alone grant it. Policies with the same
// rules, written on the same lines, as in prev are taken from prev, so an
// unchanged identity keeps the same *Policy across reloads.
//
// err is non-nil only if dir itself cannot be read.
func load(dir string, prev *Set, gen uint64) (_ *Set, _ []problem, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("policy: reading policy directory: %w", err)
	}
	policies := make(map[string]*Policy)
	var problems []problem
	for _, e := range entries {
		id := identityOf(e.Name())
		if id == "" {
			continue
		}
		file := filepath.Join(dir, e.Name())
		p, err := loadFile(file)
		if err != nil {
			last := prev.For(id)
			if last != nil {
				policies[id] = last
			}
			problems = append(problems, problem{file: file, err: err, kept: last != nil})
			continue
		}
		if p == nil {
			continue
		}
		if last := prev.For(id); last.sameAsWritten(p) {
			p = last
		}
		policies[id] = p
	}
	return newSet(gen, policies), problems, nil
}

// loadFile reads and parses one policy file. It returns nil, nil if there is
// no file to read: it is a directory, or it is gone (deleted since the
// directory was listed, or a symbolic link whose target is gone).
func loadFile(path string) (*Policy, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, nil
	}
	if !fi.Mode().IsRegular() {
		// Reading a FIFO or device could block the reload forever.
		return nil, fmt.Errorf("policy: %s: not a regular file", path)
	}
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}
