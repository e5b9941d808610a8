package replicas

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/seal"
)

func nodeAt(t *testing.T, key, self string, peers []string) *Node {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := New(config.Replicas{Enabled: true, KeyFile: path, Listen: self, Advertise: self, Peers: peers, DialTimeout: time.Second},
		config.Limits{MaxBodyBytes: 1 << 20, MaxMessageBytes: 1 << 20, ReadTimeout: time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A task id names its owner, opens for no other purpose, and Gone tells an
// owner that runs the process that sealed it from one that restarted, is
// not reachable or is no peer; BootPath answers only a replica.
func TestTaskOwnerGone(t *testing.T) {
	key := testsupport.NewReplicaKey()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ownerAddr := ln.Addr().String()
	dead := testsupport.FreePort(t)
	owner := nodeAt(t, key, ownerAddr, nil)
	srv := httptest.NewUnstartedServer(owner.PeerBoot())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	asker := nodeAt(t, key, "127.0.0.1:1", []string{ownerAddr, dead})

	id := owner.TaskIDs().Seal("local-1")
	if got, local, err := asker.TaskIDs().Open(id); err != nil || got != ownerAddr || local != "local-1" {
		t.Fatalf("Open(%q) = %q, %q, %v", id, got, local, err)
	}
	if _, _, err := asker.ring.Open(purposeSession, id); !errors.Is(err, seal.ErrOpen) {
		t.Errorf("a task id opened as a session id: %v", err)
	}
	ctx := context.Background()
	if err := asker.TaskIDs().Gone(ctx, ownerAddr, owner.TaskIDs().Boot()); err != nil {
		t.Errorf("the owner's own process: %v", err)
	}
	for what, c := range map[string]struct{ addr, boot string }{
		"restarted": {ownerAddr, "an earlier boot"},
		"dead":      {dead, owner.boot},
		"no peer":   {"127.0.0.1:2", owner.boot},
	} {
		if err := asker.TaskIDs().Gone(ctx, c.addr, c.boot); !errors.Is(err, ErrOwnerGone) {
			t.Errorf("%s: %v, want ErrOwnerGone", what, err)
		}
	}
	resp, err := http.Get(srv.URL + BootPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an unsigned %s: %d", BootPath, resp.StatusCode)
	}
}
