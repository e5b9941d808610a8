package mux

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// TestChildLogJustBeforeAnswer: a log message a stdio child writes right
// before its answer, in the same write (hostile's noted), belongs to the
// call in flight and reaches that caller before the answer, and never
// another identity's session. The calls alternate between alice (stdio)
// and bob (HTTP), one at a time, with carol (HTTP, who may see the child)
// connected: a message taken for one outside any call would reach all
// three, and one whose call ended before its turn would reach none.
func TestChildLogJustBeforeAnswer(t *testing.T) {
	tools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(tools, []byte(`[{"name":"noted","inputSchema":{"type":"object"}}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	allow := `allow = ["h__*"]`
	m := runMux(t, map[string]string{"alice": allow, "bob": allow, "carol": allow}, nil, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.h]\ncommand = %q\nenv = { HOSTILE_TOOLS = %q, GORACE = \"atexit_sleep_ms=0\" }\n",
			policies, testsupport.HostileBinary(t), tools)
	})
	connectHTTP := httpUpstream(t, m, true)
	ups := map[string]*upstreamClient{"alice": stdioUpstream(t, m, "alice"), "bob": connectHTTP("bob"), "carol": connectHTTP("carol")}
	const rounds = 200
	for i := range rounds {
		who := []string{"alice", "bob"}[i%2]
		text := fmt.Sprintf("note %d of %s", i, who)
		if got := callChild(t, ups[who], "h", "noted", map[string]any{"text": text}, nil); got != text {
			t.Fatalf("call %d answered %q", i, got)
		}
		// Both clients hand on a notification before the answer read
		// after it: what is missing now arrived after the answer, or
		// never will.
		if !slices.Contains(logsOf(ups[who]), "h: "+text) {
			t.Fatalf("%s got the answer of call %d before its log message, or without it; her logs: %q", who, i, logsOf(ups[who]))
		}
	}
	for name, u := range ups {
		got := logsOf(u)
		for _, l := range got {
			if name == "carol" || !strings.HasSuffix(l, " of "+name) {
				t.Errorf("%s received %q", name, l)
			}
		}
		if name != "carol" && len(got) != rounds/2 {
			t.Errorf("%s received %d log messages, want %d", name, len(got), rounds/2)
		}
	}
}
