package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// plainIDs "seals" as owner|local, to test the table's use of IDs apart
// from the cipher (package seal has its own tests).
type plainIDs struct {
	self string
	gone map[string]error
}

func (p plainIDs) Seal(local string) string { return p.self + "|" + local }
func (p plainIDs) Open(id string) (string, string, error) {
	owner, local, ok := strings.Cut(id, "|")
	if !ok {
		return "", "", errors.New("does not open")
	}
	return owner, local, nil
}
func (p plainIDs) Self() string { return p.self }
func (p plainIDs) Boot() string { return "b-me" }
func (p plainIDs) Gone(_ context.Context, owner, boot string) error {
	if boot == "restarted" {
		return errors.New(owner + " has restarted since")
	}
	return p.gone[owner]
}

func TestSealedLocalRoundTrip(t *testing.T) {
	ttl := int64(60000)
	created := time.UnixMilli(1764850000123).UTC()
	for _, s := range []sealedLocal{{boot: "b1", created: created, ttl: &ttl, id: "x.y-z"}, {boot: "b2", created: created, id: "u"}} {
		got, ok := parseSealedLocal(s.String())
		if !ok || got.boot != s.boot || !got.created.Equal(s.created) || got.id != s.id || (got.ttl == nil) != (s.ttl == nil) {
			t.Errorf("%q parsed as %+v, %v", s.String(), got, ok)
		}
	}
	for _, bad := range []string{"", "a.b.c", "b.notms.-.id", "b.1.notttl.id"} {
		if _, ok := parseSealedLocal(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// What the table answers for task ids that are not its process's: a gone
// owner's and an earlier boot's read failed, a live owner's "not found",
// one that does not open the bad-seal error, and its own go to mcp-go.
func TestForeignTaskIDs(t *testing.T) {
	var sessions upstream.Registry
	u, err := sessions.Admit("alice")
	if err != nil {
		t.Fatal(err)
	}
	ids := plainIDs{self: "me:1", gone: map[string]error{"dead:1": errors.New("dead:1 cannot be reached")}}
	tt := New(&sessions, nil, ids, zerolog.Nop(), nil)
	created := time.Now().UTC()
	idOf := func(owner, boot string) string {
		return owner + "|" + sealedLocal{boot: boot, created: created, id: "m1"}.String()
	}
	ask := func(method, id string) string {
		f := frame.Read([]byte(`{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{"taskId":"` + id + `"}}`))
		answer := tt.Foreign(u, &f)
		if answer == nil {
			return "mcp-go"
		}
		return string(answer(context.Background()))
	}
	for _, c := range []struct{ method, id, want string }{
		{"tasks/get", idOf("me:1", tt.boot), "mcp-go"},
		{"tasks/get", idOf("dead:1", "b"), `"status":"failed","statusMessage":"the task failed: dead:1 cannot be reached; its run and result were lost"`},
		{"tasks/result", idOf("dead:1", "b"), `"code":-32603`},
		{"tasks/cancel", idOf("dead:1", "b"), `cannot cancel a task in a terminal status`},
		{"tasks/get", idOf("me:1", "earlier"), `has restarted since`},
		{"tasks/get", idOf("live:1", "b"), `"message":"task not found"`},
		{"tasks/get", idOf("live:1", "restarted"), `"statusMessage":"the task failed: live:1 has restarted since`},
		{"tasks/get", "no seal", ErrBadTaskID.Error()},
		{"tools/call", idOf("dead:1", "b"), "mcp-go"},
	} {
		if got := ask(c.method, c.id); !strings.Contains(got, c.want) {
			t.Errorf("%s %s: %s, want %s", c.method, c.id, got, c.want)
		}
	}
	if got := tt.localID(idOf("me:1", tt.boot)); got != "m1" {
		t.Errorf("own id opened as %q", got)
	}
	if got := tt.localID(idOf("me:1", "earlier")); got != "" {
		t.Errorf("an earlier boot's id opened as %q", got)
	}
}
