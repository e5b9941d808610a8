package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The one-shot commands of the real binary, and the purity of serve's
// stdout.

// lineNumber returns the 1-based line of file that contains s.
func lineNumber(t *testing.T, file, s string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in %s", s, file)
	return 0
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	r := ts.RunCLI(t, "version")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "mcpmux ") {
		t.Fatalf("version: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}

// validate checks the config and every policy file, says where each
// problem is, all of them in one run, warns about policy patterns that can
// never match, and starts nothing.
func TestCLIValidate(t *testing.T) {
	t.Parallel()
	// at returns "FILE:LINE:" for the line of file that contains s.
	at := func(t *testing.T, file, s string) string {
		return fmt.Sprintf("%s:%d:", file, lineNumber(t, file, s))
	}
	cases := []struct {
		name string
		// lab writes the files and returns the config and the lines stderr
		// must have, in order: each line starts with one of them.
		lab    func(t *testing.T) (config string, stderr []string)
		code   int
		stdout string // for a valid setup; then stderr has only the lines given
	}{
		{
			name: "good config and policies",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "docs", ReadOnly: []string{"search"}}, ts.Server{Alias: "tickets"})
				lab.WritePolicy(t, "reader", "allow = [\"docs__*\"]\nallow_read_only = [\"tickets__*\"]\n")
				lab.WritePolicy(t, "admin", `allow = ["*"]`)
				return lab.Config, nil
			},
			code:   0,
			stdout: ": ok (2 servers, 2 policies in ",
		},
		{
			name: "unknown key in the config",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Extra: "bogus_key = true"})
				return lab.Config, []string{at(t, lab.Config, "bogus_key") + " [servers.docs] bogus_key: unknown key"}
			},
			code: 3,
		},
		{
			name: "a pin file that does not parse",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
				lab.WritePolicy(t, "admin", `allow = ["*"]`)
				pinFile := filepath.Join(filepath.Dir(lab.Config), "mcpmux.lock")
				if err := os.WriteFile(pinFile, []byte("tool docs__x sha256:00\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return lab.Config, []string{pinFile + ":1: "}
			},
			code: 3,
		},
		{
			name: "unknown key in a policy",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "docs"})
				lab.WritePolicy(t, "admin", `allow = ["*"]`)
				lab.WritePolicy(t, "reader", "# a typo\nalow = [\"x\"]\n")
				return lab.Config, []string{filepath.Join(lab.PolicyDir, "reader.toml") + `:2: unknown key "alow"`}
			},
			code: 3,
		},
		{
			name: "command and url both",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "x", Extra: `url = "https://example.com/mcp"`})
				return lab.Config, []string{at(t, lab.Config, "url = ") + " [servers.x] url: cannot be set with command"}
			},
			code: 3,
		},
		{
			// validate starts no child, but looks each command up as a
			// start would: one that does not resolve is a warning (it may
			// be installed where serve runs).
			name: "commands that do not resolve",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Command: "/nonexistent/mcpmux-test/server"},
					ts.Server{Alias: "bare", Command: "mcpmux-test-no-such-command"})
				lab.AddServer(t, ts.Server{Alias: "text", Command: lab.Config})
				lab.WritePolicy(t, "reader", `allow = ["*"]`)
				return lab.Config, []string{
					at(t, lab.Config, `"/nonexistent/mcpmux-test/server"`) + ` warning: server docs: command "/nonexistent/mcpmux-test/server" does not exist`,
					at(t, lab.Config, `"mcpmux-test-no-such-command"`) + ` warning: server bare: command "mcpmux-test-no-such-command" not found on PATH`,
					at(t, lab.Config, fmt.Sprintf("command = %q", lab.Config)) + fmt.Sprintf(` warning: server text: command %q is not an executable file`, lab.Config),
				}
			},
			code:   0,
			stdout: ": ok (3 servers, 1 policies in ",
		},
		{
			name: "every problem of the config and the policies in one run",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "log_level = \"loud\"",
					ts.Server{Alias: "docs", Extra: "bogus_key = true"},
					ts.Server{Alias: "x", Extra: `url = "https://example.com/mcp"`})
				lab.WritePolicy(t, "admin", "allow = [\n  \"*\",\n  \"docs__a.b\",\n]\n")
				lab.WritePolicy(t, "reader", "# a typo\nalow = [\"x\"]\ndeny = 3\nallow_resources = [\"docs\", 1]\n")
				lab.WritePolicy(t, "writer", "allow = [")
				admin, reader := filepath.Join(lab.PolicyDir, "admin.toml"), filepath.Join(lab.PolicyDir, "reader.toml")
				return lab.Config, []string{
					at(t, lab.Config, "log_level") + " [mux] log_level: must be one of",
					at(t, lab.Config, "bogus_key") + " [servers.docs] bogus_key: unknown key",
					at(t, lab.Config, "url = ") + " [servers.x] url: cannot be set with command",
					reader + `:2: unknown key "alow"`,
					reader + `:3: deny must be an array of strings, not an integer`,
					reader + `:4: allow_resources must contain only strings, not an integer`,
					filepath.Join(lab.PolicyDir, "writer.toml") + ":1: ",
					admin + `:3: warning: allow pattern "docs__a.b" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`,
				}
			},
			code: 3,
		},
		{
			name: "patterns that can never match are warnings",
			lab: func(t *testing.T) (string, []string) {
				lab := ts.NewLab(t, "", ts.Server{Alias: "docs"}, ts.Server{Alias: "tickets"})
				lab.WritePolicy(t, "admin", "allow = [\"*\", \"gh__*\"]\nallow_resources = [\"tick*\", \"wiki\"]\n")
				lab.WritePolicy(t, "reader", "allow = [\"docs__*\"]\ndeny = [\n  \"docs__delete.repo\",\n  \"tickets__delete_[a-z]*\",\n]\n")
				admin, reader := filepath.Join(lab.PolicyDir, "admin.toml"), filepath.Join(lab.PolicyDir, "reader.toml")
				return lab.Config, []string{
					admin + `:1: warning: allow pattern "gh__*" can never match: no server gh`,
					admin + `:2: warning: allow_resources pattern "wiki" can never match: no server wiki`,
					reader + `:3: warning: deny pattern "docs__delete.repo" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '.'`,
					reader + `:4: warning: deny pattern "tickets__delete_[a-z]*" can never match: exposed tool and prompt names have only A-Z, a-z, 0-9, '_' and '-', not '[' (a pattern has no [...] classes, only * and ?)`,
				}
			},
			code:   0,
			stdout: ": ok (2 servers, 2 policies in ",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			config, want := c.lab(t)
			r := ts.RunCLI(t, "validate", "--config", config)
			if r.Code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.Code, c.code, r.Stdout, r.Stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
			if r.Stderr == "" {
				lines = nil
			}
			// Each wanted line, in order, and for a valid setup nothing else.
			i := 0
			for _, line := range lines {
				if i < len(want) && strings.HasPrefix(line, want[i]) {
					i++
				} else if c.code == 0 {
					t.Errorf("unexpected stderr line %q", line)
				}
			}
			if i < len(want) {
				t.Errorf("stderr\n%s\nwant lines starting, in order,\n%s", r.Stderr, strings.Join(want, "\n"))
			}
			if c.code == 0 {
				if !strings.HasPrefix(r.Stdout, config+c.stdout) {
					t.Errorf("stdout %q, want it to start %q", r.Stdout, config+c.stdout)
				}
			} else if r.Stdout != "" {
				t.Errorf("stdout %q, want none", r.Stdout)
			}
			if pids := ts.CLIChildPids(r.Stderr); len(pids) != 0 {
				t.Errorf("validate started children %v", pids)
			}
		})
	}
}

// childTool is a tool as the labserver child itself lists it.
type childTool struct {
	name     string
	readOnly bool // its readOnlyHint
	schema   json.RawMessage
}

// labserverTools asks a labserver, started on its own, for its tools, in
// its order.
func labserverTools(t *testing.T) []childTool {
	t.Helper()
	_, labserver := ts.Binaries(t)
	c, err := client.NewStdioMCPClient(labserver, []string{"LAB_SOURCE=docs"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpmux-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(2)), Method: "tools/list"})
	if err != nil || resp.Error != nil {
		t.Fatalf("tools/list: %v %v", err, resp)
	}
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Annotations struct {
				ReadOnlyHint bool `json:"readOnlyHint"`
			} `json:"annotations"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(resp.Result, &list); err != nil {
		t.Fatal(err)
	}
	if list.NextCursor != "" {
		t.Fatal("labserver paged its tools/list")
	}
	var out []childTool
	for _, tl := range list.Tools {
		out = append(out, childTool{tl.Name, tl.Annotations.ReadOnlyHint, tl.InputSchema})
	}
	return out
}

// tools prints the catalog an identity would see: config order of the
// servers, then each child's own order, with the read-only flag the call
// pipeline uses; --json prints the definitions as listed upstream.
func TestCLITools(t *testing.T) {
	t.Parallel()
	// tickets comes first in the file, though it sorts after docs, and
	// trusts only its config's read_only.
	lab := ts.NewLab(t, "",
		ts.Server{Alias: "tickets", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search", "pick"}, Extra: "trust_annotations = false"},
		ts.Server{Alias: "docs", Hide: []string{"crash_for_test"}},
	)
	lab.WritePolicy(t, "reader", "allow = [\"docs__*\"]\nallow_read_only = [\"tickets__*\"]\n")

	child := labserverTools(t)
	var want []string
	for _, ct := range child {
		if ct.name == "search" || ct.name == "pick" {
			want = append(want, "tickets__"+ct.name+" "+ct.name+" tickets read-only")
		}
	}
	if len(want) != 2 {
		t.Fatalf("labserver lists %d of search and pick", len(want))
	}
	for _, ct := range child {
		if ct.name == "crash_for_test" {
			continue
		}
		mode := "read-write"
		if ct.readOnly {
			mode = "read-only"
		}
		want = append(want, "docs__"+ct.name+" "+ct.name+" docs "+mode)
	}

	r := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader")
	if r.Code != 0 {
		t.Fatalf("tools: exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	table, _, _ := strings.Cut(r.Stdout, "\n\n") // the sizes of the list follow
	header, rows, _ := strings.Cut(table, "\n")
	if strings.Join(strings.Fields(header), " ") != "TOOL CHILD TOOL SERVER MODE" {
		t.Errorf("tools header %q", header)
	}
	var got []string
	for line := range strings.Lines(rows) {
		got = append(got, strings.Join(strings.Fields(line), " "))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tools printed\n%s\nwant (as fields)\n%s", r.Stdout, strings.Join(want, "\n"))
	}
	if again := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader"); again.Stdout != r.Stdout || again.Code != 0 {
		t.Errorf("a second run printed something else:\n%s\nthen\n%s", r.Stdout, again.Stdout)
	}

	j := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader", "--json")
	if j.Code != 0 {
		t.Fatalf("tools --json: exit %d\nstderr:\n%s", j.Code, j.Stderr)
	}
	var entries []cliToolEntry
	if err := json.Unmarshal([]byte(j.Stdout), &entries); err != nil {
		t.Fatalf("tools --json is not a JSON array of objects: %v\n%s", err, j.Stdout)
	}
	var names, jsonRows []string
	var pick json.RawMessage
	for _, e := range entries {
		var def struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(e.Tool, &def); err != nil || def.Name != e.Name || len(def.InputSchema) == 0 {
			t.Errorf("entry %s: tool is not its definition under the exposed name: %s", e.Name, e.Tool)
		}
		names = append(names, e.Name)
		mode := "read-write"
		if e.ReadOnly {
			mode = "read-only"
		}
		jsonRows = append(jsonRows, e.Name+" "+e.ChildName+" "+e.Server+" "+mode)
		if e.Name == "docs__pick" {
			pick = def.InputSchema
		}
	}
	// The same fields as the table: server, the child's name, read-only.
	if !slices.Equal(jsonRows, want) {
		t.Errorf("--json entries\n%s\nwant\n%s", strings.Join(jsonRows, "\n"), strings.Join(want, "\n"))
	}
	var textNames []string
	for _, g := range got {
		textNames = append(textNames, strings.Fields(g)[0])
	}
	if !slices.Equal(names, textNames) {
		t.Errorf("--json names %v, text names %v", names, textNames)
	}
	// The child's raw schema survives, keywords mcp-go's own types lack
	// included.
	var childPick json.RawMessage
	for _, ct := range child {
		if ct.name == "pick" {
			childPick = ct.schema
		}
	}
	var gotSchema, wantSchema map[string]any
	if err := json.Unmarshal(pick, &gotSchema); err != nil {
		t.Fatalf("docs__pick inputSchema %s: %v", pick, err)
	}
	if err := json.Unmarshal(childPick, &wantSchema); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"$schema", "oneOf", "minProperties"} {
		if _, ok := gotSchema[k]; !ok {
			t.Errorf("docs__pick inputSchema lost %s: %s", k, pick)
		}
	}
	if !reflect.DeepEqual(gotSchema, wantSchema) {
		t.Errorf("docs__pick inputSchema\n%s\nwant the child's\n%s", pick, childPick)
	}
	if again := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader", "--json"); again.Stdout != j.Stdout {
		t.Errorf("a second --json run printed something else")
	}
}

// cliToolEntry is one entry of mcpmux tools --json.
type cliToolEntry struct {
	Name      string          `json:"name"`
	Server    string          `json:"server"`
	ChildName string          `json:"child_name"`
	ReadOnly  bool            `json:"read_only"`
	Tool      json.RawMessage `json:"tool"`
}

// tools shows the child's own name of each tool beside the exposed one,
// where mcpmux had to rewrite it too; a valid name keeps itself whatever the
// child's order.
func TestCLIToolsChildNames(t *testing.T) {
	t.Parallel()
	obj := `"inputSchema":{"type":"object"}`
	lab := ts.HostileLab(t, "", `[
		{"name":"write.file",`+obj+`},
		{"name":"write_file",`+obj+`},
		{"name":"two words",`+obj+`,"annotations":{"readOnlyHint":true}}
	]`, nil)
	lab.WritePolicy(t, "other", `allow = ["gh__*"]`)
	hashed := "h__write_file_" + shortHash("write.file")
	want := []string{
		hashed + ` write.file h read-write`,
		`h__write_file write_file h read-write`,
		`h__two_words "two words" h read-only`,
	}
	r := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader")
	if r.Code != 0 {
		t.Fatalf("tools: exit %d\nstderr:\n%s", r.Code, r.Stderr)
	}
	table, _, _ := strings.Cut(r.Stdout, "\n\n")
	_, rows, _ := strings.Cut(table, "\n")
	var got []string
	for line := range strings.Lines(rows) {
		got = append(got, strings.Join(strings.Fields(line), " "))
	}
	if !slices.Equal(got, want) {
		t.Errorf("tools printed\n%s\nwant (as fields)\n%s", r.Stdout, strings.Join(want, "\n"))
	}
	// Commands that load the policies log what validate warns about.
	other := filepath.Join(lab.PolicyDir, "other.toml")
	warned := false
	for line := range strings.Lines(r.Stderr) {
		var l struct{ Level, File, Message string }
		warned = warned || json.Unmarshal([]byte(line), &l) == nil && l.Level == "warn" && l.File == other &&
			l.Message == `allow pattern "gh__*" can never match: no server gh`
	}
	if !warned {
		t.Errorf("no warning logged about %s:\n%s", other, r.Stderr)
	}

	j := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader", "--json")
	var entries []cliToolEntry
	if err := json.Unmarshal([]byte(j.Stdout), &entries); err != nil || j.Code != 0 {
		t.Fatalf("tools --json: exit %d, %v\n%s\nstderr:\n%s", j.Code, err, j.Stdout, j.Stderr)
	}
	wantEntries := []cliToolEntry{
		{Name: hashed, Server: "h", ChildName: "write.file"},
		{Name: "h__write_file", Server: "h", ChildName: "write_file"},
		{Name: "h__two_words", Server: "h", ChildName: "two words", ReadOnly: true},
	}
	if len(entries) != len(wantEntries) {
		t.Fatalf("tools --json listed %d entries, want %d:\n%s", len(entries), len(wantEntries), j.Stdout)
	}
	for i, e := range entries {
		tool := e.Tool
		e.Tool = nil
		if !reflect.DeepEqual(e, wantEntries[i]) {
			t.Errorf("entry %d: %+v, want %+v", i, e, wantEntries[i])
		}
		var def struct{ Name string }
		if json.Unmarshal(tool, &def) != nil || def.Name != e.Name {
			t.Errorf("entry %d: tool %s, want the definition named %s", i, tool, e.Name)
		}
	}
}

// shortHash is the hash mcpmux appends to a name it had to rewrite, when
// that name collides: the first 8 hex digits of its SHA-256.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:8]
}

// call sends one call through the whole pipeline; its exit code tells a
// result (0) from a tool error (1), a refusal or usage error (2) and a bad
// config (3).
func TestCLICall(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "",
		ts.Server{Alias: "docs", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search"}},
		ts.Server{Alias: "tickets", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search"}},
	)
	lab.WritePolicy(t, "reader", "allow = [\"docs__*\"]\nallow_read_only = [\"tickets__*\"]\n")
	bad := ts.NewLab(t, "bogus_key = true", ts.Server{Alias: "docs"})
	bad.WritePolicy(t, "reader", `allow = ["*"]`)
	badWhere := fmt.Sprintf("%s:%d:", bad.Config, lineNumber(t, bad.Config, "bogus_key"))

	cases := []struct {
		name, config, tool, args string
		code                     int
		// text is the result's text, when one is printed; stderr is what
		// stderr must say otherwise.
		text, stderr string
	}{
		{"result", lab.Config, "docs__search", `{"query":"public"}`, 0, "docs: public evidence", ""},
		{"result of the other child", lab.Config, "tickets__search", `{"query":"public"}`, 0, "tickets: public evidence", ""},
		{"tool error", lab.Config, "docs__search", `{"query":"private"}`, 1, "service policy denies private data", ""},
		{"unknown tool", lab.Config, "nope__search", `{}`, 2, "", "unknown tool: nope__search"},
		{"hidden tool", lab.Config, "docs__crash_for_test", `{}`, 2, "", "unknown tool: docs__crash_for_test"},
		{"policy refusal", lab.Config, "tickets__append_note", `{"text":"x"}`, 2, "", "unknown tool: tickets__append_note"},
		{"invalid arguments", lab.Config, "docs__search", `{"query":3}`, 2, "/query", ""},
		{"arguments an array", lab.Config, "docs__search", `[1]`, 2, "", "arguments must be a JSON object"},
		{"arguments not JSON", lab.Config, "docs__search", `nope`, 2, "", "arguments are not JSON"},
		{"bad config", bad.Config, "docs__search", `{"query":"public"}`, 3, "", badWhere},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := ts.RunCLI(t, "call", "--config", c.config, "--as", "reader", c.tool, c.args)
			if r.Code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", r.Code, c.code, r.Stdout, r.Stderr)
			}
			if c.text == "" {
				if r.Stdout != "" || !strings.Contains(r.Stderr, c.stderr) {
					t.Errorf("stdout %q, want none; stderr %q, want %q", r.Stdout, r.Stderr, c.stderr)
				}
				return
			}
			var res struct {
				Content []struct{ Type, Text string }
				IsError bool `json:"isError"`
			}
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || len(res.Content) != 1 {
				t.Fatalf("stdout is not one result: %v\n%s", err, r.Stdout)
			}
			if !strings.Contains(res.Content[0].Text, c.text) || res.IsError != (c.code != 0) {
				t.Errorf("result isError=%v text=%q, want isError=%v and %q", res.IsError, res.Content[0].Text, c.code != 0, c.text)
			}
		})
	}
	t.Cleanup(func() {
		if notes := lab.NotesOf(t, "tickets"); notes != "" {
			t.Errorf("a refused write reached tickets: %q", notes)
		}
	})
}

// serveProc is `mcpmux serve` driven by hand over its stdio.
type serveProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr bytes.Buffer
	exited chan struct{}
}

func startServe(t *testing.T, lab *ts.Lab) *serveProc {
	t.Helper()
	bin, _ := ts.Binaries(t)
	p := &serveProc{cmd: exec.Command(bin, "serve", "--config", lab.Config), lines: make(chan string, 1024), exited: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64*1024), 4<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		<-read // Wait closes stdout; read it all first
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(ts.Wait):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Error("mcpmux serve did not exit after its stdin closed")
		}
		for _, pid := range ts.CLIChildPids(p.stderr.String()) {
			ts.WaitFor(t, fmt.Sprintf("child pid %d to be gone", pid), func() bool { return !ts.Alive(pid) })
		}
	})
	return p
}

func (p *serveProc) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.stdin, l+"\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// next returns the next stdout line, or false at EOF.
func (p *serveProc) next(t *testing.T) (string, bool) {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-time.After(ts.Wait):
		t.Fatal("no output from mcpmux serve")
		return "", false
	}
}

// rpcMessage is any JSON-RPC message as it came over the wire.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// parseRPC checks that a stdout line is one JSON-RPC 2.0 message.
func parseRPC(t *testing.T, line string) rpcMessage {
	t.Helper()
	var msg rpcMessage
	if err := json.Unmarshal([]byte(line), &msg); err != nil {
		t.Fatalf("stdout line is not JSON: %q", line)
	}
	if msg.JSONRPC != "2.0" {
		t.Fatalf("stdout line is not JSON-RPC 2.0: %q", line)
	}
	isResponse := len(msg.ID) > 0 && (msg.Result != nil || msg.Error != nil)
	if !isResponse && msg.Method == "" {
		t.Fatalf("stdout line is neither a response nor a request or notification: %q", line)
	}
	return msg
}

const (
	rpcInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"mcpmux-test","version":"1"}}}`
	rpcInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

func rpcCall(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

// Everything serve writes to stdout is JSON-RPC: logs, the children's
// stderr and errors go to stderr.
func TestServeStdoutIsOnlyJSONRPC(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search"}})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	p := startServe(t, lab)

	p.send(t, rpcInitialize)
	var all []string
	line, ok := p.next(t)
	if !ok {
		t.Fatal("no answer to initialize")
	}
	all = append(all, line)
	p.send(t,
		rpcInitialized,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		rpcCall(3, "docs__search", `{"query":"public"}`),
		rpcCall(4, "docs__search", `{"query":"private"}`),
		rpcCall(5, "nope__search", `{}`),
		rpcCall(6, "docs__echo", `{"message":"hello"}`),
		`this is not JSON`,
	)
	// Wait for the answers, then close stdin and read to the end.
	answered := map[string]bool{}
	for len(answered) < 6 { // ids 2..6 and the parse error's null id
		line, ok := p.next(t)
		if !ok {
			t.Fatalf("stdout ended early; answered %v", answered)
		}
		all = append(all, line)
		if msg := parseRPC(t, line); len(msg.ID) > 0 {
			answered[string(msg.ID)] = true
		}
	}
	_ = p.stdin.Close()
	for {
		line, ok := p.next(t)
		if !ok {
			break
		}
		all = append(all, line)
	}
	select {
	case <-p.exited:
	case <-time.After(ts.Wait):
		t.Fatal("mcpmux serve did not exit after its stdin closed")
	}

	byID := map[string]rpcMessage{}
	for _, line := range all {
		msg := parseRPC(t, line)
		if len(msg.ID) > 0 {
			byID[string(msg.ID)] = msg
		}
		if strings.Contains(line, "labserver") || strings.Contains(line, `"level"`) {
			t.Errorf("a log line on stdout: %q", line)
		}
	}
	if e := byID["null"].Error; e == nil || e.Code != mcp.PARSE_ERROR {
		t.Errorf("the line that is not JSON: %+v, want a parse error", byID["null"])
	}
	if e := byID["5"].Error; e == nil || e.Code != mcp.INVALID_PARAMS {
		t.Errorf("unknown tool: %+v, want -32602", byID["5"])
	}
	for id, want := range map[string]string{"3": "docs: public evidence", "4": "service policy denies private data", "6": "docs: hello"} {
		if !strings.Contains(string(byID[id].Result), want) {
			t.Errorf("answer %s: %+v, want %q", id, byID[id], want)
		}
	}
	if !strings.Contains(string(byID["2"].Result), `"docs__search"`) {
		t.Errorf("tools/list: %s", byID["2"].Result)
	}

	// And stderr is the log: JSON lines, the children's stderr among them.
	stderr := p.stderr.String()
	for line := range strings.Lines(stderr) {
		if !json.Valid([]byte(line)) {
			t.Errorf("stderr line is not JSON: %q", line)
		}
	}
	for _, want := range []string{`"message":"mcpmux serving on stdio"`, `labserver docs pid`, `"message":"call"`, `"message":"stdin closed; stopping"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr)
		}
	}
}

// A client may write its requests and close stdin at once (a script piping
// into mcpmux). Every request read is still answered, and truly: a
// tools/list must not claim there are no tools, nor a call be refused as an
// unknown tool, because the children were still starting when stdin ended.
func TestServeAnswersRequestsPipedBeforeEOF(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: []string{"crash_for_test"}, ReadOnly: []string{"search"}})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]`)
	p := startServe(t, lab)
	p.send(t, rpcInitialize, rpcInitialized,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		rpcCall(3, "docs__search", `{"query":"public"}`),
	)
	_ = p.stdin.Close()
	byID := map[string]rpcMessage{}
	for {
		line, ok := p.next(t)
		if !ok {
			break
		}
		if msg := parseRPC(t, line); len(msg.ID) > 0 {
			byID[string(msg.ID)] = msg
		}
	}
	if list := byID["2"]; list.Error != nil || !strings.Contains(string(list.Result), `"docs__search"`) {
		t.Errorf("tools/list answered %+v (%s), want docs__search for a client allowed docs__*", list.Error, list.Result)
	}
	if call := byID["3"]; call.Error != nil || !strings.Contains(string(call.Result), "docs: public evidence") {
		t.Errorf("docs__search, allowed and offered, answered %+v (%s)", call.Error, call.Result)
	}
	select {
	case <-p.exited:
	case <-time.After(ts.Wait):
		t.Fatal("mcpmux serve did not exit after its stdin closed")
	}
	if strings.Contains(p.stderr.String(), `"decision":"unknown"`) {
		t.Errorf("the audit log records an allowed, offered tool as unknown")
	}
}
