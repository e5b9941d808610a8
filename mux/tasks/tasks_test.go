package tasks

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// A tasks/result is answered by mcpmux itself only for a task of the
// session's own, asked in a 2025-11-25 request: another session's task,
// an unknown one, a 2026-07-28 request and anything but tasks/result go to
// mcp-go, which answers them from its store (as not found, for the first
// three).
func TestResultOfOnlyTheOwnersTask(t *testing.T) {
	var sessions upstream.Registry
	owner, err := sessions.Admit("alice")
	if err != nil {
		t.Fatal(err)
	}
	other, err := sessions.Admit("alice")
	if err != nil {
		t.Fatal(err)
	}
	tt := New(&sessions, nil, nil, zerolog.Nop(), nil)
	task := &Task{id: "t1", sess: owner}
	tt.owned.Store(task.id, task)
	modernMeta := `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, c := range []struct {
		name string
		u    *upstream.Session
		msg  string
		want *Task
	}{
		{"owner", owner, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t1"}}`, task},
		{"another session", other, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t1"}}`, nil},
		{"no session", nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t1"}}`, nil},
		{"unknown task", owner, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t2"}}`, nil},
		{"2026-07-28", owner, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t1"` + modernMeta + `}}`, nil},
		{"tasks/get", owner, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t1"}}`, nil},
		{"a notification", owner, `{"jsonrpc":"2.0","method":"tasks/result","params":{"taskId":"t1"}}`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := frame.Read([]byte(c.msg))
			if got := tt.ResultOf(c.u, &f); got != c.want {
				t.Errorf("ResultOf = %v, want %v", got, c.want)
			}
		})
	}
}
