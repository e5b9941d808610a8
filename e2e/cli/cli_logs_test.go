package cli

import (
	"encoding/json"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// With log_format = "json", everything the commands that run the children
// write to stderr is one JSON object a line: mcpmux's own log, what the
// libraries inside it log (mcp-go's transports among them), and nothing at
// level error when all went well. The hostile child asks mcpmux something
// as its stdin ends, as server-everything does when it is stopped early:
// the answer has nowhere to go, which is no error.
func TestCLILogsAreJSON(t *testing.T) {
	t.Parallel()
	lab := ts.HostileLab(t, `log_format = "json"`, `[{"name":"echo","inputSchema":{"type":"object"}}]`,
		map[string]string{"HOSTILE_EOF_REQUEST": "ping"})
	serveInput := strings.Join([]string{rpcInitialize, rpcInitialized, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`}, "\n") + "\n"
	cases := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"tools", "", []string{"tools", "--config", lab.Config, "--as", "reader"}},
		{"call", "", []string{"call", "--config", lab.Config, "--as", "reader", "h__echo", `{"x":1}`}},
		{"pins diff", "", []string{"pins", "diff", "--config", lab.Config}},
		{"serve", serveInput, []string{"serve", "--config", lab.Config}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := ts.RunCLIStdin(t, c.stdin, c.args...)
			asked := false
			for line := range strings.Lines(r.Stderr) {
				var l struct {
					Level, Message, Stderr string
				}
				if err := json.Unmarshal([]byte(line), &l); err != nil {
					t.Errorf("stderr line is not JSON: %q", line)
					continue
				}
				if l.Level == "error" {
					t.Errorf("an error logged by a run that went well: %s", line)
				}
				asked = asked || strings.Contains(l.Stderr, "hostile asked ping")
			}
			if !asked {
				t.Errorf("the child never asked its question at the end of its stdin; stderr:\n%s", r.Stderr)
			}
			if c.name == "serve" && !strings.Contains(r.Stdout, `"h__echo"`) {
				t.Errorf("serve answered\n%s", r.Stdout)
			}
		})
	}
}
