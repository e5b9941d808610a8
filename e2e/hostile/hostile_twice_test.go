package hostile

import (
	"fmt"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// A child that answers one request twice, a short answer and then a long
// one that mcpmux takes past mcp-go's decoding: the call gets the first
// answer, as mcp-go keeps it, and the call after it gets its own. Each
// round gives the second answer another chance to reach the first call.
func TestHostileAnswerTwice(t *testing.T) {
	t.Parallel()
	tools := `[` + hostileEcho + `,{"name":"twice","inputSchema":{"type":"object"}}]`
	m := ts.StartMux(t, ts.HostileLab(t, "", tools, nil))
	for i := range 20 {
		if res := m.MustCall("h__twice", map[string]any{"kb": 8 + i}); res.IsError || ts.Text(res) != "first" {
			t.Fatalf("round %d: twice: isError=%v, %d bytes beginning %.40q; want the first answer", i, res.IsError, len(ts.Text(res)), ts.Text(res))
		}
		want := fmt.Sprintf(`{"round":%d}`, i)
		if res := m.MustCall("h__echo", map[string]any{"round": i}); res.IsError || ts.Text(res) != want {
			t.Fatalf("round %d: the call after: isError=%v %.60q; want %s", i, res.IsError, ts.Text(res), want)
		}
	}
	if lines := m.Log.Lines(ts.Msg("server went away; restarting")); len(lines) != 0 {
		t.Errorf("the child was restarted: %v", lines)
	}
	// Not vacuous: the child did answer each call twice.
	ts.WaitFor(t, "the child's 20 double answers", func() bool { return strings.Count(m.Log.Text(), "hostile answered") == 20 })
}
