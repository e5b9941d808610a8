package main

// In-process tests of what the command itself decides: its command table,
// flag parsing and help, exit codes, how it names files in what it prints,
// and the refusals it makes before any child starts. e2e/cli runs the
// built binary end to end.

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/mux"
)

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

// runIn runs mcpmux with args in process, in the working directory dir,
// with stdin empty.
func runIn(t *testing.T, dir string, args ...string) result {
	t.Helper()
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(""), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// lab is a config with one server (never started by these tests) and a
// policy directory, in a temporary directory that the tests run in.
type lab struct {
	dir, config, policies string
}

func newLab(t *testing.T, muxLines string) *lab {
	t.Helper()
	dir := t.TempDir()
	l := &lab{dir: dir, config: filepath.Join(dir, "mcpmux.toml"), policies: filepath.Join(dir, "policies")}
	if err := os.Mkdir(l.policies, 0o755); err != nil {
		t.Fatal(err)
	}
	l.write(t, "mcpmux.toml", "[mux]\npolicy_dir = \"policies\"\n"+muxLines+"\n\n[servers.docs]\ncommand = \"/bin/true\"\n")
	return l
}

// write writes body to the lab's file name.
func (l *lab) write(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(l.dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCommandTable: each command's synopsis, which help prints, names
// exactly the flags its flag set takes, so that help cannot promise a flag
// the command refuses or hide one it takes.
func TestCommandTable(t *testing.T) {
	flagRE := regexp.MustCompile(`--([a-z]+)`)
	seen := map[string]bool{}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			if seen[c.name] {
				t.Fatalf("command %s is listed twice", c.name)
			}
			seen[c.name] = true
			if lookup(c.name) != c {
				t.Errorf("lookup(%q) is not the command", c.name)
			}
			var synopsis []string
			for _, m := range flagRE.FindAllStringSubmatch(c.synopsis, -1) {
				synopsis = append(synopsis, m[1])
			}
			var defined []string
			c.flagSet().VisitAll(func(f *flag.Flag) { defined = append(defined, f.Name) })
			slices.Sort(synopsis)
			slices.Sort(defined)
			if !slices.Equal(synopsis, defined) {
				t.Errorf("synopsis %q names the flags %q; the command defines %q", c.synopsis, synopsis, defined)
			}
			var usage bytes.Buffer
			c.writeUsage(&usage)
			if !strings.HasPrefix(usage.String(), strings.TrimSpace("usage: mcpmux "+c.name+" "+c.synopsis)+"\n\n"+capitalize(c.what)+".\n") {
				t.Errorf("usage starts %q", usage.String())
			}
			for _, f := range defined {
				if !strings.Contains(usage.String(), "\n  -"+f) {
					t.Errorf("usage lacks -%s:\n%s", f, usage.String())
				}
			}
		})
	}
	if lookup("pins") != nil || lookup("nosuch") != nil {
		t.Error("lookup finds a command that is not one")
	}
}

// TestParse: --help ends a command with its usage on stdout and exit 0; a
// bad flag or value ends it with flag's error and the usage on stderr and
// exit 2; good flags go on to the command.
func TestParse(t *testing.T) {
	c := lookup("tools")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		done   bool
		stdout string // what it starts with
		stderr string // what it holds
	}{
		{"flags", []string{"--config", "x.toml", "--as", "alice", "--json"}, exitOK, false, "", ""},
		{"no flags", nil, exitOK, false, "", ""},
		{"--help", []string{"--help"}, exitOK, true, "usage: mcpmux tools --config FILE", ""},
		{"-h after flags", []string{"--as", "alice", "-h"}, exitOK, true, "usage: mcpmux tools", ""},
		{"unknown flag", []string{"--bogus"}, exitRefused, true, "", "flag provided but not defined: -bogus"},
		{"bad bool", []string{"--json=maybe"}, exitRefused, true, "", `invalid boolean value "maybe" for -json`},
		{"missing value", []string{"--as"}, exitRefused, true, "", "flag needs an argument: -as"},
		{"claims not an object", []string{"--claims", "[1]"}, exitRefused, true, "", "want a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, done := c.parse(c.flagSet(), tc.args, &stdout, &stderr)
			if code != tc.code || done != tc.done {
				t.Errorf("parse = %d, %v; want %d, %v", code, done, tc.code, tc.done)
			}
			if !strings.HasPrefix(stdout.String(), tc.stdout) || tc.stdout == "" && stdout.Len() > 0 {
				t.Errorf("stdout %q, want it to start %q", stdout.String(), tc.stdout)
			}
			if !strings.Contains(stderr.String(), tc.stderr) || tc.stderr == "" && stderr.Len() > 0 {
				t.Errorf("stderr %q, want it to hold %q", stderr.String(), tc.stderr)
			}
			if tc.stderr != "" && !strings.Contains(stderr.String(), "usage: mcpmux tools") {
				t.Errorf("stderr %q lacks the usage", stderr.String())
			}
		})
	}
}

// TestRunCommands: which command run picks and the exit codes of those
// that need no config.
func TestRunCommands(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args           []string
		code           int
		stdout, stderr string // what each holds; "" for nothing
	}{
		{[]string{"version"}, exitOK, "mcpmux " + mux.Version + " (" + runtime.Version() + ")\n", ""},
		{[]string{"version", "--json"}, exitRefused, "", "flag provided but not defined: -json"},
		{[]string{"help", "pins", "diff"}, exitOK, "usage: mcpmux pins diff", ""},
		{[]string{"help", "pins"}, exitOK, "mcpmux pins approve", ""},
		{[]string{"help", "pins", "frob"}, exitRefused, "", `mcpmux help: unknown command "pins frob"`},
		{[]string{"pins", "-h"}, exitOK, "mcpmux pins diff", ""},
		{[]string{"pins", "frob"}, exitRefused, "", `mcpmux pins: unknown command "frob"`},
		{[]string{"pins", "approve", "--bogus"}, exitRefused, "", "usage: mcpmux pins approve"},
		// With no command, the flags are serve's.
		{[]string{"--identity", "alice"}, exitRefused, "", "mcpmux: --config is required"},
		{[]string{"-help"}, exitOK, "usage: mcpmux COMMAND", ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runIn(t, dir, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.stdout) || tc.stdout == "" && r.stdout != "" {
				t.Errorf("stdout %q, want it to hold %q", r.stdout, tc.stdout)
			}
			if !strings.Contains(r.stderr, tc.stderr) || tc.stderr == "" && r.stderr != "" {
				t.Errorf("stderr %q, want it to hold %q", r.stderr, tc.stderr)
			}
		})
	}
}

// TestValidateNamesFileAndLine: validate's exit code and what it prints
// for a config, its policy files and its pin file, each problem naming its
// file (relative to the working directory) and line.
func TestValidateNamesFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		muxLines string
		files    map[string]string
		code     int
		stdout   string
		stderr   []string // lines it starts with, in order
	}{
		{name: "ok", files: map[string]string{"policies/alice.toml": `allow = ["docs__*"]`, "policies/bob.toml": "allow = []"},
			code: exitOK, stdout: "mcpmux.toml: ok (1 servers, 2 policies in policies)\n"},
		{name: "config key", muxLines: `colour = "blue"`, code: exitBadConfig,
			stderr: []string{`mcpmux.toml:3: `}},
		{name: "policy key", files: map[string]string{"policies/alice.toml": "\nalow = [\"docs__*\"]"}, code: exitBadConfig,
			stderr: []string{`policies/alice.toml:2: unknown key "alow"`}},
		{name: "every problem, errors before warnings", muxLines: `colour = "blue"`,
			files: map[string]string{"policies/alice.toml": `allow = ["gh__*"]`, "policies/bob.toml": "deny = 3"}, code: exitBadConfig,
			stderr: []string{"mcpmux.toml:3: ", "policies/bob.toml:1: ", `policies/alice.toml:1: warning: allow pattern "gh__*"`}},
		{name: "warning alone", files: map[string]string{"policies/alice.toml": `allow = ["gh__*"]`}, code: exitOK,
			stdout: "mcpmux.toml: ok (1 servers, 1 policies in policies)\n",
			stderr: []string{`policies/alice.toml:1: warning: allow pattern "gh__*"`}},
		{name: "pin file", muxLines: `pinning = "warn"`, files: map[string]string{"mcpmux.lock": "tool docs__x sha256:00\n"}, code: exitBadConfig,
			stderr: []string{"mcpmux.lock:1: "}},
		{name: "pin file unread when pinning is off", muxLines: `pinning = "off"`, files: map[string]string{"mcpmux.lock": "tool docs__x sha256:00\n"},
			code: exitOK, stdout: "mcpmux.toml: ok (1 servers, 0 policies in policies)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLab(t, tc.muxLines)
			for name, body := range tc.files {
				l.write(t, name, body+"\n")
			}
			r := runIn(t, l.dir, "validate", "--config", l.config)
			if r.code != tc.code || r.stdout != tc.stdout {
				t.Errorf("exit %d, stdout %q; want %d, %q", r.code, r.stdout, tc.code, tc.stdout)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if r.stderr == "" {
				lines = nil
			}
			if len(lines) != len(tc.stderr) {
				t.Fatalf("stderr:\n%s\nwant %d lines starting %q", r.stderr, len(tc.stderr), tc.stderr)
			}
			for i, want := range tc.stderr {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("stderr line %d %q, want it to start %q", i+1, lines[i], want)
				}
			}
		})
	}
}

// TestLoadRefusals: the refusals every command that loads the config
// makes before it starts anything, with their exit codes: 2 for what the
// command line got wrong, 3 for the files.
func TestLoadRefusals(t *testing.T) {
	l := newLab(t, "")
	l.write(t, "policies/alice.toml", `allow = ["docs__*"]`+"\n")
	l.write(t, "policies/broken.toml", "allow = 3\n")
	missing := filepath.Join(l.dir, "missing.toml")
	noDir := newLab(t, "")
	if err := os.Remove(noDir.policies); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"validate without --config", []string{"validate"}, exitRefused, "mcpmux: --config is required"},
		{"tools without --config", []string{"tools", "--as", "alice"}, exitRefused, "mcpmux: --config is required"},
		{"serve without --config", []string{"serve"}, exitRefused, "mcpmux: --config is required"},
		{"no config file", []string{"validate", "--config", missing}, exitBadConfig, "missing.toml"},
		{"tools: no config file", []string{"tools", "--config", missing, "--as", "alice"}, exitBadConfig, "missing.toml"},
		{"no policy dir", []string{"tools", "--config", noDir.config, "--as", "alice"}, exitBadConfig, ": policy_dir: "},
		{"tools without --as", []string{"tools", "--config", l.config}, exitRefused, "mcpmux tools: --as needs a valid identity name"},
		{"tools as a bad name", []string{"tools", "--config", l.config, "--as", "a/b"}, exitRefused, "--as needs a valid identity name"},
		{"tools as no one", []string{"tools", "--config", l.config, "--as", "nobody"}, exitRefused,
			"mcpmux tools: no policy file for identity nobody: policies/nobody.toml does not exist (identities with one: alice)"},
		{"call as one whose policy does not load", []string{"call", "--config", l.config, "--as", "broken", "docs__x"}, exitBadConfig,
			"mcpmux call: the policy file of identity broken, policies/broken.toml, does not load"},
		{"call without a tool", []string{"call", "--config", l.config, "--as", "alice"}, exitRefused, "then come TOOL"},
		{"call with three arguments", []string{"call", "--config", l.config, "--as", "alice", "docs__x", "{}", "{}"}, exitRefused, "then come TOOL"},
		{"call arguments not JSON", []string{"call", "--config", l.config, "--as", "alice", "docs__x", "{"}, exitRefused, "mcpmux call: arguments are not JSON"},
		{"call arguments not an object", []string{"call", "--config", l.config, "--as", "alice", "docs__x", "[1]"}, exitRefused, "mcpmux call: arguments must be a JSON object"},
		{"serve as a bad name", []string{"serve", "--config", l.config, "--identity", "a b"}, exitRefused, `--identity: "a b" is not a valid identity name`},
		{"serve on a bad address", []string{"serve", "--config", l.config, "--listen", "nowhere"}, exitBadConfig, "--listen: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIn(t, l.dir, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr\n%s\nwant %d, none, and %q", r.code, r.stdout, r.stderr, tc.code, tc.stderr)
			}
		})
	}
}

// TestProfilesOffByDefault: without MCPMUX_CPUPROFILE and MCPMUX_MEMPROFILE
// no profile is written; with them, each is written to its name with the
// process id appended.
func TestProfilesOffByDefault(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("MCPMUX_CPUPROFILE", "")
	t.Setenv("MCPMUX_MEMPROFILE", "")
	startProfiles()()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("profiles off wrote %v", entries)
	}
	t.Setenv("MCPMUX_CPUPROFILE", filepath.Join(dir, "cpu"))
	t.Setenv("MCPMUX_MEMPROFILE", filepath.Join(dir, "mem"))
	startProfiles()()
	for _, name := range []string{"cpu", "mem"} {
		fi, err := os.Stat(filepath.Join(dir, name+"."+strconv.Itoa(os.Getpid())))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s profile: %v", name, err)
		}
	}
}
