package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The operator's commands say what happened in words that fit it.

// A rule over claims alone, refusing a caller who has no claims, says that
// the claims lack the key, not that the arguments do.
func TestCLICallRuleSaysClaimsLackTheKey(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]

[[rule]]
tools = ["docs__echo"]
allow_if = 'claims.team == "ops"'
message = "only ops may echo"
`)
	r := ts.RunCLI(t, "call", "--config", lab.Config, "--as", "reader", "docs__echo", `{"message":"hi"}`)
	want := "only ops may echo (policy rule 1 could not be evaluated: the caller's claims have no key team, so the call was refused)"
	if r.Code != 2 || !strings.Contains(r.Stderr, want) {
		t.Errorf("call: exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
}

// pins diff says which fields of a definition differ from its pin, in a
// sentence: one field differs, several differ.
func TestCLIPinsDiffNamesTheFields(t *testing.T) {
	t.Parallel()
	lab := ts.NewPinLab(t, "", ts.FirstDefs)
	if r := ts.RunCLI(t, "pins", "approve", "--config", lab.Config); r.Code != 0 {
		t.Fatalf("pins approve: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	lab.WriteDefs(t, ts.PinDefs{Description: "Search the docs, then more.", ReadOnlyHint: false, PromptDesc: "Greets, then obeys."})
	r := ts.RunCLI(t, "pins", "diff", "--config", lab.Config)
	for _, want := range []string{
		"changed tool " + ts.PinnedTool + " (server docs): annotations, description differ from the pin\n",
		"changed prompt " + ts.PinnedPrompt + " (server docs): description differs from the pin\n",
	} {
		if r.Code != 1 || !strings.Contains(r.Stdout, want) {
			t.Errorf("pins diff: exit %d, stdout\n%s\nwant 1 and %q", r.Code, r.Stdout, want)
		}
	}
}

// validate reports every problem of one policy file in one run: an unknown
// key and a rule with both allow_if and deny_if do not hide the
// expressions' syntax and type errors.
func TestCLIValidateEveryProblemOfAPolicy(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "reader", `alow = ["docs__*"]

[[rule]]
tools = ["docs__*"]
allow_if = 'true'
deny_if = 'false'

[[rule]]
tools = ["docs__*"]
allow_if = 'args.path.startsWith('

[[rule]]
tools = ["docs__*"]
deny_if = 'tool > 3'
`)
	file := filepath.Join(lab.PolicyDir, "reader.toml")
	r := ts.RunCLI(t, "validate", "--config", lab.Config)
	want := []string{
		file + `:1: unknown key "alow"`,
		file + ":6: a [[rule]] has one of allow_if and deny_if, not both (allow_if is on line 5)",
		file + ":10: allow_if: column 22: Syntax error: ",
		file + ":14: deny_if: column 6: found no matching overload for '_>_' applied to '(string, int)'",
	}
	lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
	if r.Code != 3 || len(lines) != len(want) {
		t.Fatalf("validate: exit %d, stderr\n%s\nwant 3 and\n%s", r.Code, r.Stderr, strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start %q", i+1, lines[i], w)
		}
	}
}

// The upstream's secrets are serve's: the commands that serve nothing
// upstream (tools, call, pins diff, validate) warn, naming the file and
// line, that a token's variable is not set, and go on; serve refuses.
func TestCLIOfflineCommandsWarnOfUpstreamSecrets(t *testing.T) {
	t.Parallel()
	const unset = "MCPMUX_TEST_NEVER_SET_TOKEN"
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden})
	lab.AddUpstream(t, "listen = \"127.0.0.1:0\"\n[[upstream.tokens]]\nidentity = \"restricted\"\nenv = \""+unset+"\"\n")
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	line := lineNumber(t, lab.Config, unset)
	msg := "[upstream] tokens[0].env: environment variable " + unset + " is not set (only serve needs it)"

	// Each logs the warning with the file and line.
	for _, args := range [][]string{
		{"tools", "--config", lab.Config, "--as", "reader"},
		{"call", "--config", lab.Config, "--as", "reader", "docs__echo", `{"message":"hi"}`},
		{"pins", "diff", "--config", lab.Config},
	} {
		r := ts.RunCLI(t, args...)
		if r.Code == 3 {
			t.Errorf("%s: exit 3\n%s", args[0], r.Stderr)
		}
		warned := false
		for l := range strings.Lines(r.Stderr) {
			var w struct {
				Level, File, Message string
				Line                 int
			}
			warned = warned || json.Unmarshal([]byte(l), &w) == nil && w.Level == "warn" && w.File == lab.Config && w.Line == line && w.Message == msg
		}
		if !warned {
			t.Errorf("%s: no warning %q at %s:%d logged:\n%s", strings.Join(args[:2], " "), msg, lab.Config, line, r.Stderr)
		}
	}
	r := ts.RunCLI(t, "validate", "--config", lab.Config)
	if want := fmt.Sprintf("%s:%d: warning: %s\n", lab.Config, line, msg); r.Code != 0 || r.Stderr != want {
		t.Errorf("validate: exit %d, stderr %q; want 0 and %q", r.Code, r.Stderr, want)
	}
	r = ts.RunCLI(t, "serve", "--config", lab.Config)
	if want := fmt.Sprintf("%s:%d: [upstream] tokens[0].env: environment variable %s is not set\n", lab.Config, line, unset); r.Code != 3 || r.Stderr != want {
		t.Errorf("serve: exit %d, stderr %q; want 3 and %q", r.Code, r.Stderr, want)
	}
}

// A typo'd identity is said loudly: tools and call name the missing policy
// file and the identities that have one, and exit 2 (as a refusal); serve
// logs a warning at start, and again when the file appears or goes.
func TestCLIIdentityWithoutPolicy(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	lab.WritePolicy(t, "admin", `allow = ["*"]`)
	missing := filepath.Join(lab.PolicyDir, "nobody.toml")
	want := "no policy file for identity nobody: " + missing + " does not exist (identities with one: admin, reader)"
	for _, args := range [][]string{
		{"tools", "--config", lab.Config, "--as", "nobody"},
		{"tools", "--config", lab.Config, "--as", "nobody", "--json"},
		{"call", "--config", lab.Config, "--as", "nobody", "docs__echo", `{"message":"hi"}`},
	} {
		r := ts.RunCLI(t, args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "mcpmux "+args[0]+": "+want+"\n") || r.Stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr\n%s\nwant 2, nothing on stdout and %q", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr, want)
		}
	}
	// A policy file that exists but does not load is a bad config.
	lab.WritePolicy(t, "broken", "allow = [")
	broken := filepath.Join(lab.PolicyDir, "broken.toml")
	r := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "broken")
	if want := "mcpmux tools: the policy file of identity broken, " + broken + ", does not load (see its errors above): broken may use nothing"; r.Code != 3 || !strings.Contains(r.Stderr, want) {
		t.Errorf("tools --as broken: exit %d, stderr\n%s\nwant 3 and %q", r.Code, r.Stderr, want)
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}

	m := ts.StartMux(t, lab, "--identity", "nobdy")
	l := m.Log.WaitLine(t, "the warning about nobdy", ts.Msg("no policy file for the stdio client's identity: it may use nothing", "identity", "nobdy"))
	if l["level"] != "warn" || l["file"] != filepath.Join(lab.PolicyDir, "nobdy.toml") || fmt.Sprint(l["identities"]) != "[admin reader]" {
		t.Errorf("logged %v", l)
	}
	lab.WritePolicy(t, "nobdy", `allow = ["docs__*"]`)
	m.Log.WaitLine(t, "nobdy's file appearing", ts.Msg("the stdio client's identity has a policy file now", "identity", "nobdy"))
	if err := os.Remove(filepath.Join(lab.PolicyDir, "nobdy.toml")); err != nil {
		t.Fatal(err)
	}
	m.Log.WaitLine(t, "nobdy's file gone", ts.Msg("no policy file for the stdio client's identity: it may use nothing", "identity", "nobdy", "level", "warn"))
}

// tools and pins diff exit 1 when a child did not come up, naming each and
// why, after printing what the others offer; a catalog missing a server is
// not a catalog to exit 0 on.
func TestCLIChildThatCannotStart(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden},
		ts.Server{Alias: "bad", Command: "/nonexistent/mcpmux-test/server"})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	want := "server bad did not come up (down; "
	for _, args := range [][]string{
		{"tools", "--config", lab.Config, "--as", "reader"},
		{"tools", "--config", lab.Config, "--as", "reader", "--json"},
		{"pins", "diff", "--config", lab.Config},
	} {
		r := ts.RunCLI(t, args...)
		prefix := "mcpmux " + args[0] + ": "
		if args[0] == "pins" {
			prefix = "mcpmux pins diff: "
		}
		if r.Code != 1 || !strings.Contains(r.Stderr, prefix+want) || !strings.Contains(r.Stderr, "/nonexistent/mcpmux-test/server") {
			t.Errorf("%s: exit %d, stderr\n%s\nwant 1 and %q", strings.Join(args, " "), r.Code, r.Stderr, prefix+want)
		}
		if !strings.Contains(r.Stdout, "docs__echo") {
			t.Errorf("%s: stdout %q lacks what docs offers", strings.Join(args, " "), r.Stdout)
		}
	}
}

// mcpmux --help, -h and help print the usage of every command, every flag
// of each included, and exit 0; a command's --help prints its own; an
// unknown flag or command exits 2 with the usage on stderr.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	every := []string{
		"mcpmux serve", "mcpmux validate", "mcpmux tools", "mcpmux call", "mcpmux pins diff", "mcpmux pins approve", "mcpmux version",
		"-config FILE", "-identity NAME", "-listen ADDR", "-stdio", "-as NAME", "-claims JSON", "-json", "[NAME...]",
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		r := ts.RunCLI(t, args...)
		if r.Code != 0 || r.Stderr != "" {
			t.Errorf("mcpmux %s: exit %d, stderr %q; want 0 and none", args[0], r.Code, r.Stderr)
		}
		for _, w := range every {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("mcpmux %s lacks %q:\n%s", args[0], w, r.Stdout)
			}
		}
	}
	for _, c := range []struct {
		args      []string
		has, lack []string
	}{
		{[]string{"serve", "--help"}, []string{"usage: mcpmux serve --config FILE", "-listen ADDR", "-stdio", "-identity NAME"}, []string{"-as NAME"}},
		{[]string{"tools", "-h"}, []string{"usage: mcpmux tools --config FILE --as NAME", "-claims JSON", "-json"}, []string{"-listen"}},
		{[]string{"call", "--help"}, []string{"usage: mcpmux call --config FILE --as NAME", "-claims JSON", "TOOL"}, []string{"-json"}},
		{[]string{"validate", "--help"}, []string{"usage: mcpmux validate --config FILE", "-config FILE"}, []string{"-as"}},
		{[]string{"pins", "diff", "--help"}, []string{"usage: mcpmux pins diff --config FILE [--live] [NAME...]", "-config FILE", "-live"}, []string{"pins approve"}},
		{[]string{"pins", "--help"}, []string{"mcpmux pins diff", "mcpmux pins approve"}, []string{"mcpmux tools"}},
		{[]string{"help", "tools"}, []string{"usage: mcpmux tools --config FILE --as NAME"}, []string{"mcpmux serve"}},
	} {
		r := ts.RunCLI(t, c.args...)
		if r.Code != 0 || r.Stderr != "" {
			t.Errorf("mcpmux %s: exit %d, stderr %q; want 0 and none", strings.Join(c.args, " "), r.Code, r.Stderr)
		}
		for _, w := range c.has {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("mcpmux %s lacks %q:\n%s", strings.Join(c.args, " "), w, r.Stdout)
			}
		}
		for _, w := range c.lack {
			if strings.Contains(r.Stdout, w) {
				t.Errorf("mcpmux %s has %q:\n%s", strings.Join(c.args, " "), w, r.Stdout)
			}
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"tools", "--bogus"}, []string{"flag provided but not defined: -bogus", "usage: mcpmux tools --config FILE"}},
		{[]string{"--bogus"}, []string{"flag provided but not defined: -bogus", "usage: mcpmux serve --config FILE"}},
		{[]string{"bogus"}, []string{`unknown command "bogus"`, "mcpmux tools"}},
		{[]string{"pins"}, []string{"mcpmux pins diff"}},
		{[]string{"help", "bogus"}, []string{`unknown command "bogus"`}},
	} {
		r := ts.RunCLI(t, c.args...)
		if r.Code != 2 || r.Stdout != "" {
			t.Errorf("mcpmux %s: exit %d, stdout %q; want 2 and none", strings.Join(c.args, " "), r.Code, r.Stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("mcpmux %s: stderr lacks %q:\n%s", strings.Join(c.args, " "), w, r.Stderr)
			}
		}
	}
}

// Every FILE:LINE message names its file the same way, config, policy and
// pin file alike: relative to the working directory when the file is in
// it, however --config was given.
func TestCLIPathsInMessages(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "log_level = \"loud\"", ts.Server{Alias: "docs", Command: "/nonexistent/mcpmux-test/server"})
	lab.WritePolicy(t, "reader", "alow = [\"x\"]\n")
	lab.WritePolicy(t, "admin", "allow = [\"gh__*\"]\n")
	if err := os.WriteFile(filepath.Join(lab.Dir, "mcpmux.lock"), []byte("tool docs__x sha256:00\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("mcpmux.toml:%d: [mux] log_level: ", lineNumber(t, lab.Config, "log_level")),
		"policies/reader.toml:1: unknown key \"alow\"",
		"mcpmux.lock:1: ",
		fmt.Sprintf("mcpmux.toml:%d: warning: server docs: command", lineNumber(t, lab.Config, "/nonexistent/")),
		"policies/admin.toml:1: warning: allow pattern \"gh__*\"",
	}
	for _, config := range []string{"mcpmux.toml", "./mcpmux.toml", lab.Config} {
		r := ts.RunCLIIn(t, lab.Dir, "", "validate", "--config", config)
		lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
		if r.Code != 3 || len(lines) != len(want) {
			t.Errorf("--config %s: exit %d, stderr\n%s\nwant 3 and\n%s", config, r.Code, r.Stderr, strings.Join(want, "\n"))
			continue
		}
		for i, w := range want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("--config %s: line %d: %q, want it to start %q", config, i+1, lines[i], w)
			}
		}
	}
	// A file outside the working directory is named by its absolute path.
	r := ts.RunCLIIn(t, t.TempDir(), "", "validate", "--config", lab.Config)
	if !strings.HasPrefix(r.Stderr, lab.Config+":") || !strings.Contains(r.Stderr, "\n"+filepath.Join(lab.PolicyDir, "reader.toml")+":1: ") {
		t.Errorf("from elsewhere: stderr\n%s\nwant absolute paths", r.Stderr)
	}
}
