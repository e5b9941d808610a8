package main

// An identity named on the command line or in the config that has no
// policy file may use nothing, which looks like an empty catalog: a typo
// must be said out loud.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/policy"
)

// policyFile is the file of identity's policy in dir.
func policyFile(dir, identity string) string {
	return filepath.Join(dir, identity+".toml")
}

// noPolicy says why identity has no policy in set, or "" when it has one.
// broken is true when its file exists but does not load (its errors are
// logged where the policies are loaded).
func noPolicy(set *policy.Set, dir, identity string) (why string, broken bool) {
	if set.For(identity) != nil {
		return "", false
	}
	file := policyFile(dir, identity)
	if _, err := os.Stat(file); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("the policy file of identity %s, %s, does not load (see its errors above): %s may use nothing", identity, shown(file), identity), true
	}
	others := "there are no policy files in " + shown(dir)
	if ids := set.Identities(); len(ids) > 0 {
		others = "identities with one: " + strings.Join(ids, ", ")
	}
	return fmt.Sprintf("no policy file for identity %s: %s does not exist (%s)", identity, shown(file), others), false
}

// checkIdentity refuses a one-shot command's --as identity that has no
// policy: it returns the exit code, having said why, or exitOK.
func checkIdentity(cmd string, l *loaded, identity string, stderr io.Writer) int {
	why, broken := noPolicy(l.policies.Current(), l.cfg.Mux.PolicyDir, identity)
	switch {
	case why == "":
		return exitOK
	case broken:
		fmt.Fprintf(stderr, "mcpmux %s: %s\n", cmd, why)
		return exitBadConfig
	}
	fmt.Fprintf(stderr, "mcpmux %s: %s\n", cmd, why)
	return exitRefused
}

// stdioIdentityWatch logs, at start and whenever the policies change it,
// that the stdio client's identity has no policy file (or has one again).
type stdioIdentityWatch struct {
	log      zerolog.Logger
	dir      func() string // the policy directory in force
	identity string
}

const noStdioPolicyMsg = "no policy file for the stdio client's identity: it may use nothing"

// start logs the warning if the identity has no policy in set.
func (w *stdioIdentityWatch) start(set *policy.Set) {
	if set.For(w.identity) == nil {
		w.warn(set)
	}
}

// changed is told of every reload that published a set.
func (w *stdioIdentityWatch) changed(old, cur *policy.Set) {
	had, has := old.For(w.identity) != nil, cur.For(w.identity) != nil
	switch {
	case had && !has:
		w.warn(cur)
	case !had && has:
		w.log.Info().Str("identity", w.identity).Str("file", policyFile(w.dir(), w.identity)).
			Msg("the stdio client's identity has a policy file now")
	}
}

func (w *stdioIdentityWatch) warn(set *policy.Set) {
	msg := noStdioPolicyMsg
	if _, broken := noPolicy(set, w.dir(), w.identity); broken {
		msg = "the policy file of the stdio client's identity does not load: it may use nothing"
	}
	w.log.Warn().Str("identity", w.identity).Str("file", policyFile(w.dir(), w.identity)).
		Strs("identities", set.Identities()).Msg(msg)
}
