package wire

import (
	"strings"
	"testing"
)

// The normalizer replaces what varies, numbered by first appearance, and
// nothing else.
func TestNormalize(t *testing.T) {
	for _, c := range []struct {
		name  string
		text  string
		vars  map[string][]string
		paths map[string]string
		want  string
	}{
		{
			name: "sessions numbered by first appearance, wherever they recur",
			text: "< POST#1 [Mcp-Session-Id: b]\n> POST#2 [Mcp-Session-Id: a]\n> POST#3 [Mcp-Session-Id: b]\n",
			vars: map[string][]string{"session": {"a", "b"}},
			want: "< POST#1 [Mcp-Session-Id: <session-1>]\n> POST#2 [Mcp-Session-Id: <session-2>]\n> POST#3 [Mcp-Session-Id: <session-1>]\n",
		},
		{
			name: "task ids and requestStates mcpmux wrote, also where the script sends them back",
			text: `< {"result":{"task":{"taskId":"u-1"},"requestState":"s+/="}}` + "\n" + `> {"params":{"taskId":"u-1","requestState":"s+/="}}` + "\n",
			want: `< {"result":{"task":{"taskId":"<task-1>"},"requestState":"<state-1>"}}` + "\n" + `> {"params":{"taskId":"<task-1>","requestState":"<state-1>"}}` + "\n",
		},
		{
			name: "a task id the script made up is kept",
			text: `> {"params":{"taskId":"no-such-task"}}` + "\n" + `< {"error":{"message":"task not found"}}` + "\n",
			want: `> {"params":{"taskId":"no-such-task"}}` + "\n" + `< {"error":{"message":"task not found"}}` + "\n",
		},
		{
			name: "times",
			text: `< {"createdAt":"2026-12-01T22:47:17Z","lastUpdatedAt":"2026-12-01T22:47:18.25+01:00","at":"2026-12-01"}` + "\n",
			want: `< {"createdAt":"<time>","lastUpdatedAt":"<time>","at":"2026-12-01"}` + "\n",
		},
		{
			name:  "temporary paths, the longer first",
			text:  "/tmp/x/lab/policies and /tmp/x/lab and /tmp/bin/mcpmux\n",
			paths: map[string]string{"/tmp/x/lab": "<lab>", "/tmp/x/lab/policies": "<policies>", "/tmp/bin": "<bin>"},
			want:  "<policies> and <lab> and <bin>/mcpmux\n",
		},
		{
			name: "long runs of one byte keep their length",
			text: "a" + strings.Repeat("x", minRun) + "b" + strings.Repeat("y", minRun-1) + "\n",
			want: "a<64×x>b" + strings.Repeat("y", minRun-1) + "\n",
		},
		{
			name: "nothing else",
			text: `< {"jsonrpc":"2.0","id":12345,"result":{"pid":4242,"text":"<task-1>"}}` + "\n",
			want: `< {"jsonrpc":"2.0","id":12345,"result":{"pid":4242,"text":"<task-1>"}}` + "\n",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := normalize(c.text, c.vars, c.paths); got != c.want {
				t.Errorf("normalize:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

func TestUnifiedDiff(t *testing.T) {
	lines := func(s ...string) string { return strings.Join(s, "\n") + "\n" }
	want := lines("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l")
	got := lines("a", "B", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m")
	const diff = "@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n" +
		"@@ -10,4 +10,5 @@\n j\n k\n l\n+m\n \n"
	if d := unifiedDiff(want, got, 3); d != diff {
		t.Errorf("unifiedDiff:\n%s\nwant:\n%s", d, diff)
	}
	if d := unifiedDiff(want, want, 3); d != "" {
		t.Errorf("unifiedDiff of equal texts: %q", d)
	}
}
