package reload

import (
	"crypto/rsa"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Tests of policy rules ([[rule]] with CEL): a real mcpmux, real children
// (the official filesystem server among them), real policy files edited on
// disk, real JWTs.

// publicRule is the README's example over root: reader may read only under
// root/data/public.
func publicRule(root string) string {
	return fmt.Sprintf(`allow = ["fs__*"]

[[rule]]
tools = ["fs__read_*", "fs__list_directory"]
allow_if = 'args.path.startsWith(%q) && !args.path.contains("..")'
message = "reader may read only under /data/public"
`, root+"/data/public/")
}

// ruleLine returns the audit line of the nth call refused by a rule.
func ruleLine(t *testing.T, log *ts.LogTap, n int) map[string]any {
	t.Helper()
	seen := 0
	return log.WaitLine(t, fmt.Sprintf("refusal %d by a rule", n), func(l map[string]any) bool {
		if l["message"] != "call" || l["decision"] != "rule" {
			return false
		}
		seen++
		return seen == n
	})
}

// The /data/public example against @modelcontextprotocol/server-filesystem:
// a path inside is read, one outside or with .. is refused with the rule's
// message and never reaches the server; a symbolic link inside that points
// outside passes the rule (which sees the argument, not what the server
// does with it) and the server follows it.
func TestRulesFilesystem(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"data/public", "secret"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path, s string) {
		if err := os.WriteFile(filepath.Join(root, path), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("data/public/hello.txt", "hello, public")
	write("secret/key.txt", "the secret")
	if err := os.Symlink(filepath.Join(root, "secret/key.txt"), filepath.Join(root, "data/public/link.txt")); err != nil {
		t.Fatal(err)
	}
	lab := ts.NewLab(t, "", ts.FilesystemServer(t, "fs", root))
	lab.WritePolicy(t, "reader", publicRule(root))
	m := ts.StartMux(t, lab)
	if names := m.ToolNames(); !ts.Contains(names, "fs__read_text_file") || !ts.Contains(names, "fs__list_directory") {
		t.Fatalf("tools: %v", names)
	}

	if res := m.MustCall("fs__read_text_file", map[string]any{"path": root + "/data/public/hello.txt"}); res.IsError || ts.Text(res) != "hello, public" {
		t.Fatalf("inside: %v %q", res.IsError, ts.Text(res))
	}
	if res := m.MustCall("fs__list_directory", map[string]any{"path": root + "/data/public/"}); res.IsError || !strings.Contains(ts.Text(res), "hello.txt") {
		t.Fatalf("listing inside: %v %q", res.IsError, ts.Text(res))
	}
	refused := 0
	for _, path := range []string{
		root + "/secret/key.txt",
		root + "/data/public/../../secret/key.txt",
		root + "/data/publicity.txt",
		"data/public/hello.txt", // relative: the server would resolve it against its own directory
	} {
		res := m.MustCall("fs__read_text_file", map[string]any{"path": path})
		if want := "fs__read_text_file: reader may read only under /data/public"; !res.IsError || ts.Text(res) != want {
			t.Errorf("%s: %v %q; want isError %q", path, res.IsError, ts.Text(res), want)
		}
		refused++
		l := ruleLine(t, m.Log, refused)
		if l["tool"] != "fs__read_text_file" || l["rule"] != 1.0 || l["rule_line"] != 5.0 || l["outcome"] != "refused" {
			t.Errorf("%s: audit line %v", path, l)
		}
	}
	// The rule sees the argument, a path inside /data/public; the server
	// follows the link out of it.
	res := m.MustCall("fs__read_text_file", map[string]any{"path": root + "/data/public/link.txt"})
	if res.IsError || ts.Text(res) != "the secret" {
		t.Fatalf("through the link: %v %q; want the secret, let through", res.IsError, ts.Text(res))
	}
}

// A rule on claims hides a tool from the callers it refuses, over the HTTP
// upstream with real JWTs: not listed, a call refused as an unknown name;
// another caller of the same identity sees and calls it.
func TestRulesClaimsOverHTTP(t *testing.T) {
	t.Parallel()
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	ts.ReplaceFile(t, jwksFile, ts.JWKS(t, map[string]*rsa.PrivateKey{"k1": ts.RSAKeyA()}))
	lab := ts.HTTPLab(t, "", `listen = "127.0.0.1:0"`+
		fmt.Sprintf("\n[upstream.jwt]\nissuer = %q\naudience = %q\njwks_file = %q\n", ts.JWTIssuer, ts.JWTAudience, jwksFile),
		ts.Server{Alias: "docs"})
	lab.WritePolicy(t, "alice", `allow = ["docs__*"]

[[rule]]
tools = ["docs__echo"]
allow_if = 'claims.team == "ops"'
`)
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	ops := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"team": "ops"}), Log: h.Log})
	dev := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.SignJWT(t, ts.RSAKeyA(), "k1", map[string]any{"team": "dev"}), Log: h.Log})
	none := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.SignJWT(t, ts.RSAKeyA(), "k1", nil), Log: h.Log})

	if names := ops.ToolNames(); !ts.Contains(names, "docs__echo") || !ts.Contains(names, "docs__search") {
		t.Fatalf("ops sees %v", names)
	}
	if res := ops.MustCall("docs__echo", map[string]any{"message": "hi"}); ts.Text(res) != "docs: hi" {
		t.Fatalf("ops: %q", ts.Text(res))
	}
	for who, c := range map[string]*ts.Conn{"dev": dev, "no team claim": none} {
		if names := c.ToolNames(); ts.Contains(names, "docs__echo") || !ts.Contains(names, "docs__search") {
			t.Errorf("%s sees %v", who, names)
		}
		res, err := c.Call("docs__echo", map[string]any{"message": "hi"})
		if msg := ts.RefusedCall(res, err, "docs__echo"); msg != "" {
			t.Errorf("%s: %s", who, msg)
		}
	}
	l := ruleLine(t, h.Log, 1)
	if l["identity"] != "alice" || l["rule"] != 1.0 || l["rule_line"] != 5.0 {
		t.Errorf("audit line %v", l)
	}
}

// A broken expression saved over a good policy keeps the good one in force
// (and says where the expression is wrong); the fixed file takes over.
// Arguments without what the rule reads (echo's message is optional, so the
// call is valid) fail closed: refused by the rule, not the schema.
func TestRulesBrokenExpressionKeepsLastGood(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden})
	good := `allow = ["docs__*"]

[[rule]]
tools = ["docs__echo"]
deny_if = 'args.message == "no"'
`
	lab.WritePolicy(t, "reader", good)
	m := ts.StartMux(t, lab)
	if res := m.MustCall("docs__echo", map[string]any{"message": "no"}); !res.IsError || !strings.Contains(ts.Text(res), "rule 1") {
		t.Fatalf("good rule: %v %q", res.IsError, ts.Text(res))
	}
	res := m.MustCall("docs__echo", map[string]any{})
	if !res.IsError || !strings.Contains(ts.Text(res), "could not be evaluated: the arguments have no key message, so the call was refused") {
		t.Errorf("no message: %v %q; want refused by the rule", res.IsError, ts.Text(res))
	}
	if l := ruleLine(t, m.Log, 2); l["tool"] != "docs__echo" || l["rule"] != 1.0 || l["outcome"] != "refused" {
		t.Errorf("no message: audit line %v", l)
	}
	file := filepath.Join(lab.PolicyDir, "reader.toml")
	lab.WritePolicy(t, "reader", strings.Replace(good, `args.message == "no"`, `args.message = "no"`, 1))
	l := m.Log.WaitLine(t, "the broken policy's error", ts.Msg("policy file not loaded; its identity keeps its last good policy"))
	if l["file"] != file || l["line"] != 5.0 || !strings.Contains(fmt.Sprint(l["error"]), file+":5: deny_if: column 14:") {
		t.Errorf("logged %v", l)
	}
	if res := m.MustCall("docs__echo", map[string]any{"message": "no"}); !res.IsError {
		t.Errorf("the last good rule is no longer in force: %q", ts.Text(res))
	}
	if res := m.MustCall("docs__echo", map[string]any{"message": "yes"}); res.IsError {
		t.Errorf("yes: %q", ts.Text(res))
	}

	lab.WritePolicy(t, "reader", strings.Replace(good, `"no"`, `"stop"`, 1))
	ts.WaitFor(t, "the fixed rule", func() bool {
		return !m.MustCall("docs__echo", map[string]any{"message": "no"}).IsError
	})
	if res := m.MustCall("docs__echo", map[string]any{"message": "stop"}); !res.IsError {
		t.Errorf("the fixed rule does not refuse stop: %q", ts.Text(res))
	}
}

// A runaway expression is stopped by the cost limit, and the call is
// refused (fail closed) with a message saying so.
func TestRulesCostLimit(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden})
	hundred := make([]string, 100)
	for i := range hundred {
		hundred[i] = fmt.Sprint(i)
	}
	list := "[" + strings.Join(hundred, ", ") + "]"
	lab.WritePolicy(t, "reader", fmt.Sprintf(`allow = ["docs__*"]

[[rule]]
tools = ["docs__echo"]
allow_if = '%[1]s.all(a, %[1]s.all(b, %[1]s.all(c, args.message != "")))'
`, list))
	m := ts.StartMux(t, lab)
	res := m.MustCall("docs__echo", map[string]any{"message": "hi"})
	if !res.IsError || !strings.Contains(ts.Text(res), "cost limit (100000)") || !strings.Contains(ts.Text(res), "was refused") {
		t.Fatalf("runaway rule: %v %q", res.IsError, ts.Text(res))
	}
	ruleLine(t, m.Log, 1)
	if res := m.MustCall("docs__search", map[string]any{"query": "x"}); strings.Contains(ts.Text(res), "rule") {
		t.Errorf("a tool without the rule: %q", ts.Text(res))
	}
}

// mcpmux call --as names the rule that refused, with its file and line,
// and exits as refused; --claims gives tools and call the claims rules see.
// mcpmux validate reports a broken rule at its line, and warns about a
// rule whose tools can never match.
func TestRulesCLI(t *testing.T) {
	t.Parallel()
	lab := ts.NewLab(t, "", ts.Server{Alias: "docs", Hide: ts.LabHidden})
	lab.WritePolicy(t, "reader", `allow = ["docs__*"]

[[rule]]
tools = ["docs__*"]
deny_if = 'has(args.message) && args.message.contains("secret")'
message = "no secrets in messages"

[[rule]]
tools = ["docs__search"]
allow_if = 'identity == "nobody"'

[[rule]]
tools = ["docs__echo"]
deny_if = '"team" in claims && claims.team == "dev"'
`)
	file := filepath.Join(lab.PolicyDir, "reader.toml")
	r := ts.RunCLI(t, "call", "--config", lab.Config, "--as", "reader", "docs__echo", `{"message":"a secret"}`)
	if want := "mcpmux call: docs__echo refused by rule 1 (" + file + ":5): no secrets in messages\n"; r.Code != 2 || !strings.Contains(r.Stderr, want) {
		t.Errorf("call: exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
	r = ts.RunCLI(t, "call", "--config", lab.Config, "--as", "reader", "docs__search", `{"query":"x"}`)
	if want := "mcpmux call: docs__search refused by rule 2 (" + file + ":10): refused by policy rule 2, which allows a call only when identity == \"nobody\"\n"; r.Code != 2 || !strings.Contains(r.Stderr, want) {
		t.Errorf("hidden: exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
	if r := ts.RunCLI(t, "call", "--config", lab.Config, "--as", "reader", "docs__echo", `{"message":"hi"}`); r.Code != 0 || !strings.Contains(r.Stdout, "docs: hi") {
		t.Errorf("allowed call: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}

	dev := []string{"--claims", `{"team":"dev"}`}
	r = ts.RunCLI(t, append([]string{"call", "--config", lab.Config, "--as", "reader"}, append(dev, "docs__echo", `{"message":"hi"}`)...)...)
	if want := "mcpmux call: docs__echo refused by rule 3 (" + file + ":14): "; r.Code != 2 || !strings.Contains(r.Stderr, want) {
		t.Errorf("call as dev: exit %d, stderr %q; want 2 and %q", r.Code, r.Stderr, want)
	}
	if r := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader"); r.Code != 0 || !strings.Contains(r.Stdout, "docs__echo") {
		t.Errorf("tools without claims: exit %d, stdout %q", r.Code, r.Stdout)
	}
	if r := ts.RunCLI(t, append([]string{"tools", "--config", lab.Config, "--as", "reader"}, dev...)...); r.Code != 0 || strings.Contains(r.Stdout, "docs__echo") || !strings.Contains(r.Stdout, "docs__") {
		t.Errorf("tools as dev: exit %d, stdout %q; want the tools without docs__echo", r.Code, r.Stdout)
	}
	for _, bad := range []string{`["team"]`, `{"team":`, "null"} {
		if r := ts.RunCLI(t, "tools", "--config", lab.Config, "--as", "reader", "--claims", bad); r.Code != 2 || !strings.Contains(r.Stderr, "want a JSON object") {
			t.Errorf("--claims %s: exit %d, stderr %q; want 2", bad, r.Code, r.Stderr)
		}
	}

	lab.WritePolicy(t, "reader", "allow = [\"docs__*\"]\n\n[[rule]]\ntools = [\"doc__*\"]\ndeny_if = 'true'\n")
	r = ts.RunCLI(t, "validate", "--config", lab.Config)
	if want := file + `:4: warning: rule 1: tools pattern "doc__*" can never match: no server doc`; r.Code != 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("validate: exit %d, stderr %q; want 0 and %q", r.Code, r.Stderr, want)
	}
	lab.WritePolicy(t, "reader", "allow = [\"docs__*\"]\n\n[[rule]]\ntools = [\"*\"]\nallow_if = 'tool > 3'\n")
	r = ts.RunCLI(t, "validate", "--config", lab.Config)
	if want := file + ":5: allow_if: column 6: found no matching overload for '_>_' applied to '(string, int)'"; r.Code == 0 || !strings.Contains(r.Stderr, want) {
		t.Errorf("validate: exit %d, stderr %q; want %q", r.Code, r.Stderr, want)
	}
}
