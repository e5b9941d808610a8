package mux

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// The attributes and events of the list that a call alone does not
// show: a prompt's and a read's target, the rule that refused, the wait
// through a child's restart.

func TestTraceOfPromptsReadsRulesAndRestarts(t *testing.T) {
	_, lab := testsupport.Binaries(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	gate := filepath.Join(t.TempDir(), "gate")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	policy := `allow = ["*"]` + "\n" + `allow_resources = ["lab"]` + "\n\n" +
		"[[rule]]\ntools = [\"lab__echo\"]\ndeny_if = 'args.message == \"no\"'\nmessage = \"not that\"\n"
	m := runMuxWith(t, map[string]string{"dev": policy}, nil, Options{Tracing: telemetry.New(tp)}, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\ncommand = %q\nmax_in_flight = 1\nenv = { LAB_FIDELITY = \"1\", LAB_START_GATE = %q }\n",
			policies, lab, gate)
	})
	s := openSessionAs(t, m, "dev")
	defer s.close()

	s.exchange(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"lab__brief","arguments":{"topic":"x"}}}`)
	wantAttrs(t, spanNamed(t, exp, "prompts/get lab__brief"), map[string]string{"mcp.method.name": "prompts/get",
		"gen_ai.prompt.name": "lab__brief", "mcpmux.server.alias": "lab", "mcpmux.outcome": "ok"})
	wantAttrs(t, spanNamed(t, exp, "prompts/get brief"), map[string]string{"gen_ai.prompt.name": "brief", "mcpmux.server.alias": "lab"})

	const uri = "mcpmux://lab/file:///lab/readme.txt"
	s.exchange(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"` + uri + `"}}`)
	wantAttrs(t, spanNamed(t, exp, "resources/read "+uri), map[string]string{"mcp.method.name": "resources/read",
		"mcp.resource.uri": uri, "mcpmux.server.alias": "lab"})
	wantAttrs(t, spanNamed(t, exp, "resources/read file:///lab/readme.txt"), map[string]string{"mcp.resource.uri": "file:///lab/readme.txt"})

	// A rule refuses: its index, and the line of its expression in the policy file.
	s.exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lab__echo","arguments":{"message":"no"}}}`)
	wantAttrs(t, spanNamed(t, exp, "tools/call lab__echo"), map[string]string{"mcpmux.policy.decision": "rule",
		"mcpmux.policy.rule": "1", "mcpmux.policy.rule_line": "6", "error.type": "tool_error"})

	// The child crashes and comes back only once the gate is open again: a
	// call made meanwhile waits through the restart, in the one slot of
	// max_in_flight (a second call queued behind it shows it is there).
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	exp.Reset()
	s.exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lab__crash_for_test","arguments":{}}}`)
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"lab__echo","arguments":{"message":"after"}}}`)
	s.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"lab__echo","arguments":{"message":"queued"}}}`)
	testsupport.WaitFor(t, "the second call to queue behind the first", func() bool { return m.p.Calls().Queued("lab") == 1 })
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for answered := 0; answered < 2; {
		msg := <-s.out
		if id, ok := testsupport.RefAnswerID([]byte(msg)); ok && (id == "5" || id == "6") {
			if !strings.Contains(msg, `"result"`) {
				t.Fatalf("a call after the restart: %s", msg)
			}
			answered++
		}
	}
	var waited int
	for _, sp := range spansNamed(exp, "tools/call lab__echo") {
		for _, e := range sp.Events {
			if e.Name == telemetry.EventChildWait {
				waited++
				wantEvent(t, sp, telemetry.EventChildWait, map[string]string{"mcpmux.server.alias": "lab", "mcpmux.child.phase": "restarting"})
			}
		}
	}
	if waited == 0 {
		t.Errorf("no call's span has the event %s", telemetry.EventChildWait)
	}
}

// TestTraceOfARetry: a read-only call whose child is killed under it is
// sent again to the child's next session, and its span says so.
func TestTraceOfARetry(t *testing.T) {
	_, lab := testsupport.Binaries(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	started := t.TempDir()
	log := &testsupport.SyncBuffer{}
	m := runMuxWith(t, map[string]string{"dev": `allow = ["*"]`}, log, Options{Tracing: telemetry.New(tp)}, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\ncommand = %q\nenv = { LAB_STARTED_DIR = %q }\n", policies, lab, started)
	})
	s := openSessionAs(t, m, "dev")
	defer s.close()
	pid := 0
	for _, line := range strings.Split(log.String(), "\n") {
		var l struct {
			Message string `json:"message"`
			Pid     int    `json:"pid"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "server ready" {
			pid = l.Pid
		}
	}
	if pid == 0 {
		t.Fatalf("no pid in the server ready line:\n%s", log.String())
	}
	// The first run is killed as soon as it has begun (its file dropped);
	// the second answers after its wait.
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lab__slow","arguments":{"ms":3000,"tag":"ro"}}}`)
	mark := filepath.Join(started, "ro")
	testsupport.WaitFor(t, "the first run to begin", func() bool { _, err := os.Stat(mark); return err == nil })
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for {
		msg := <-s.out
		if id, ok := testsupport.RefAnswerID([]byte(msg)); ok && id == "1" {
			if !strings.Contains(msg, "slept 3000 tag=ro") {
				t.Fatalf("the retried call: %s", msg)
			}
			break
		}
	}
	wantEvent(t, spanNamed(t, exp, "tools/call lab__slow"), telemetry.EventRetry, map[string]string{"mcpmux.retry.server.alias": "lab"})
}
