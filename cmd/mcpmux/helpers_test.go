package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/internal/fileerr"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/pins"
	"github.com/mcpmux/mcpmux/policy"
)

func TestClaimsFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want string // String() after a good Set
	}{
		{`{"team":"ops"}`, true, `{"team":"ops"}`},
		{`{"groups":["a","b"],"level":3}`, true, `{"groups":["a","b"],"level":3}`},
		{`{}`, true, `{}`},
		{`null`, false, ""},
		{`["ops"]`, false, ""},
		{`"ops"`, false, ""},
		{`{"team":`, false, ""},
		{``, false, ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var c claims
			err := c.Set(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("Set(%q) = %v, want ok %v", tc.in, err, tc.ok)
			}
			if got := c.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
	if got := (*claims)(nil).String(); got != "" {
		t.Errorf("nil claims print %q", got)
	}
}

// TestTableField: a name a child chose is quoted when it could break or
// hide in tools' table, and printed as it is otherwise.
func TestTableField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"search", "search"},
		{"search.v2-beta_é", "search.v2-beta_é"},
		{"two words", `"two words"`},
		{"tab\there", `"tab\there"`},
		{"line\nbreak", `"line\nbreak"`},
		{`say"hi`, `"say\"hi"`},
		{"bell\a", `"bell\a"`},
		{"nbsp\u00a0", `"nbsp\u00a0"`},
		{"rtl\u202e", `"rtl\u202e"`},
		{"", ""},
	} {
		if got := tableField(tc.in); got != tc.want {
			t.Errorf("tableField(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestLoopbackListen decides whether /readyz and /metrics are mounted on
// the MCP listener.
func TestLoopbackListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.9.9.9:8080", true},
		{"localhost:8080", true},
		{"LocalHost:1", true},
		{"[::1]:8080", true},
		{"[::ffff:127.0.0.1]:8080", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"10.0.0.1:8080", false},
		{"localhost.example.com:8080", false},
		{"127.0.0.1", false},
		{"", false},
	} {
		if got := loopbackListen(tc.addr); got != tc.want {
			t.Errorf("loopbackListen(%q) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// TestShownAndReport: files inside the working directory are named
// relative to it, others absolutely, in every FILE:LINE line.
func TestShownAndReport(t *testing.T) {
	root := t.TempDir()
	wd := filepath.Join(root, "work")
	if err := os.MkdirAll(filepath.Join(wd, "policies"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)
	outside := filepath.Join(root, "elsewhere.toml")
	for _, tc := range []struct{ in, want string }{
		{filepath.Join(wd, "mcpmux.toml"), "mcpmux.toml"},
		{"mcpmux.toml", "mcpmux.toml"},
		{"./policies/../policies/a.toml", "policies/a.toml"},
		{outside, outside},
		{"../elsewhere.toml", outside},
		{filepath.Join(root, "work2", "x.toml"), filepath.Join(root, "work2", "x.toml")},
		{"..data/x.toml", "..data/x.toml"}, // a name starting "..", inside
	} {
		if got := shown(tc.in); got != tc.want {
			t.Errorf("shown(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}

	var b bytes.Buffer
	report(&b, fileerr.Errors{
		{File: filepath.Join(wd, "mcpmux.toml"), Line: 3, Msg: "bad"},
		{File: outside, Msg: "unreadable"},
	})
	report(&b, &fileerr.Error{File: filepath.Join(wd, "policies", "a.toml"), Line: 1, Msg: "worse"})
	report(&b, errors.New("plain"))
	warn(&b, filepath.Join(wd, "mcpmux.toml"), 7, "careful")
	want := "mcpmux.toml:3: bad\n" + outside + ": unreadable\npolicies/a.toml:1: worse\nplain\nmcpmux.toml:7: warning: careful\n"
	if b.String() != want {
		t.Errorf("report wrote\n%s\nwant\n%s", b.String(), want)
	}
}

// TestNoPolicy: what a one-shot command says of an identity without a
// usable policy, and whether its file is there but broken.
func TestNoPolicy(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	empty := filepath.Join(dir, "empty")
	pdir := filepath.Join(dir, "policies")
	for _, d := range []string{empty, pdir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"alice.toml": `allow = ["*"]`, "bob.toml": `allow = []`, "broken.toml": "allow = 3"} {
		if err := os.WriteFile(filepath.Join(pdir, name), []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, _ := policy.LoadDir(pdir)
	none, _ := policy.LoadDir(empty)
	for _, tc := range []struct {
		set      *policy.Set
		dir, id  string
		why      string
		broken   bool
		wantNone bool
	}{
		{set, pdir, "alice", "", false, true},
		{set, pdir, "bob", "", false, true}, // a policy that allows nothing is a policy
		{set, pdir, "carol", "no policy file for identity carol: policies/carol.toml does not exist (identities with one: alice, bob)", false, false},
		{set, pdir, "broken", "the policy file of identity broken, policies/broken.toml, does not load (see its errors above): broken may use nothing", true, false},
		{none, empty, "alice", "no policy file for identity alice: empty/alice.toml does not exist (there are no policy files in empty)", false, false},
	} {
		why, broken := noPolicy(tc.set, tc.dir, tc.id)
		if why != tc.why || broken != tc.broken {
			t.Errorf("noPolicy(%s) = %q, %v; want %q, %v", tc.id, why, broken, tc.why, tc.broken)
		}
	}
}

// TestStdioIdentityWatch: serve warns at start that the stdio client's
// identity has no policy (or a broken one), and says so again, or that it
// has one now, as reloads change that.
func TestStdioIdentityWatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "alice.toml")
	load := func(body string) *policy.Set {
		t.Helper()
		if body == "" {
			_ = os.Remove(file)
		} else if err := os.WriteFile(file, []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		set, _ := policy.LoadDir(dir)
		return set
	}
	var logged bytes.Buffer
	w := &stdioIdentityWatch{log: zerolog.New(&logged), dir: func() string { return dir }, identity: "alice"}
	records := func() []map[string]any {
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
			var rec map[string]any
			if line != "" && json.Unmarshal([]byte(line), &rec) == nil {
				out = append(out, rec)
			}
		}
		logged.Reset()
		return out
	}
	expect := func(step, level, msg string) {
		t.Helper()
		recs := records()
		if level == "" {
			if len(recs) != 0 {
				t.Errorf("%s: logged %v, want nothing", step, recs)
			}
			return
		}
		if len(recs) != 1 || recs[0]["level"] != level || recs[0]["message"] != msg || recs[0]["identity"] != "alice" || recs[0]["file"] != file {
			t.Errorf("%s: logged %v, want one %s %q about alice and %s", step, recs, level, msg, file)
		}
	}
	none := load("")
	w.start(none)
	expect("start without", "warn", noStdioPolicyMsg)
	has := load(`allow = ["*"]`)
	w.changed(none, has)
	expect("file written", "info", "the stdio client's identity has a policy file now")
	w.changed(has, has)
	expect("other reload", "", "")
	broken := load("allow = 3")
	w.changed(has, broken)
	expect("file broken", "warn", "the policy file of the stdio client's identity does not load: it may use nothing")
	w.start(has)
	expect("start with", "", "")
}

func TestDescribePinState(t *testing.T) {
	def := &pins.Def{}
	pin := &pins.Pin{}
	for _, tc := range []struct {
		st   publish.PinState
		want string
	}{
		{publish.PinState{Kind: "tool", Name: "docs__a", Server: "docs", Pinned: pin}, "gone tool docs__a (server docs): pinned, no longer listed"},
		{publish.PinState{Kind: "tool", Name: "docs__a", Server: "docs", Live: def}, "new tool docs__a (server docs): never pinned"},
		{publish.PinState{Kind: "prompt", Name: "docs__p", Server: "docs", Live: def, Pinned: pin}, "changed prompt docs__p (server docs): its definition differs from the pin"},
		{publish.PinState{Kind: "tool", Name: "docs__a", Server: "docs", Live: def, Pinned: pin, Changed: []string{"description"}},
			"changed tool docs__a (server docs): description differs from the pin"},
		{publish.PinState{Kind: "tool", Name: "docs__a", Server: "docs", Live: def, Pinned: pin, Changed: []string{"description", "inputSchema"}},
			"changed tool docs__a (server docs): description, inputSchema differ from the pin"},
	} {
		if got := describe(tc.st); got != tc.want {
			t.Errorf("describe = %q, want %q", got, tc.want)
		}
	}
	if got := holders([]pins.Holder{{Host: "a", PID: 1}}); got != "1 mcpmux serve process: a pid 1" {
		t.Errorf("holders of one = %q", got)
	}
	if got := holders([]pins.Holder{{Host: "a", PID: 1}, {Host: "b", PID: 2}}); got != "2 mcpmux serve processes: a pid 1, b pid 2" {
		t.Errorf("holders of two = %q", got)
	}
}
