package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// TestRoundHandOutEnded: a round whose context has ended hands out no
// requestState, and leaves none in the table.
func TestRoundHandOutEnded(t *testing.T) {
	rt := &roundTable{}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errRequestGone)
	r := &round{rt: rt, ctx: ctx, pending: []*childAsk{{method: string(mcp.MethodListRoots), reply: make(chan askReply, 1)}}}
	if raw, ok := r.handOut(); ok {
		t.Fatalf("an ended round handed out %s", raw)
	}
	rt.byToken.Range(func(k, _ any) bool { t.Errorf("state %v left in the table", k); return true })
}

// TestRoundsRefusedOnceClosing: once wait (Mux.Close) has begun, no round
// starts, and wait still waits for the one running.
func TestRoundsRefusedOnceClosing(t *testing.T) {
	rt := &roundTable{idle: make(chan struct{}, 1)}
	if !rt.enter() {
		t.Fatal("a round refused before closing")
	}
	waited := make(chan struct{})
	go func() { rt.wait(); close(waited) }()
	testsupport.WaitFor(t, "wait to begin", func() bool { return rt.running.Load()&roundsClosed != 0 })
	if rt.enter() {
		t.Fatal("a round started once closing")
	}
	select {
	case <-waited:
		t.Fatal("wait returned with a round running")
	default:
	}
	rt.finished()
	<-waited
}

// TestRoundHoldGivenBack: places reserved by hold are given back, the
// identity's counter dropped once it is zero.
func TestRoundHoldGivenBack(t *testing.T) {
	rt := &roundTable{}
	c := child.New(nil, child.Env{Config: &config.Config{}}, config.Server{Alias: "x", MaxInFlight: 4})
	var keys []string
	for range 2 {
		k, refused := rt.hold("alice", c)
		if refused != "" {
			t.Fatal(refused)
		}
		keys = append(keys, k)
	}
	if _, refused := rt.hold("alice", c); refused == "" {
		t.Fatal("a third round of alice at a server of max_in_flight 4")
	}
	for _, k := range keys {
		rt.unhold(k)
	}
	if n := rt.waiting.Load(); n != 0 {
		t.Errorf("%d places still counted", n)
	}
	rt.held.Range(func(k, _ any) bool { t.Errorf("counter %q left", k); return true })
}

// TestRoundAnswerNotRetried: a round whose work has its answer between
// rounds ends once nobody retries within its hold (shortened here), not at
// call_timeout, and its requestState is gone.
func TestRoundAnswerNotRetried(t *testing.T) {
	p := newPipeline(t, `call_timeout = "1h"`)
	p.rounds.holdFor = time.Millisecond
	done := make(chan struct{})
	r := p.rounds.start(upstream.WithIdentity(context.Background(), "alice"), &upstream.Request{Method: string(mcp.MethodToolsCall)}, mcp.MethodToolsCall, "st__asks",
		func(context.Context, *child.Call) answer { <-done; return answer{} })
	r.mu.Lock()
	r.pending = append(r.pending, &childAsk{method: string(mcp.MethodListRoots), reply: make(chan askReply, 1)})
	r.mu.Unlock()
	if _, ok := r.handOut(); !ok {
		t.Fatal("nothing handed out")
	}
	state := ""
	p.rounds.byToken.Range(func(k, _ any) bool { state = k.(string); return false })
	close(done)
	testsupport.WaitFor(t, "the unclaimed answer's round to end", func() bool {
		_, _, waits := p.RoundAsks(state)
		return !waits && errors.Is(context.Cause(r.ctx), errNotRetried)
	})
}

// newPipeline returns a pipeline under a config whose [mux] section has
// muxLines, of one server, st, which is never started.
func newPipeline(t *testing.T, muxLines string) *Pipeline {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse(filepath.Join(dir, "mcpmux.toml"), []byte("[mux]\npolicy_dir = \".\"\n"+muxLines+"\n\n[servers.st]\ncommand = \"never-started\"\n"),
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	var cat atomic.Pointer[catalog.Catalog]
	cat.Store(catalog.Empty)
	ready := make(chan struct{})
	close(ready)
	p := New(Deps{Config: cfg, Policies: store, Log: zerolog.Nop(), Catalog: &cat, Sessions: &upstream.Registry{}, Ready: ready})
	t.Cleanup(func() {
		p.Calls().Cut(ErrShuttingDown)
		p.Close()
	})
	return p
}
