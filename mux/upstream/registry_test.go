package upstream

import (
	"sync"
	"testing"
	"time"
)

// The idle sweeper never ends a session a request has begun on since it
// found the session idle: a request that began is never cut off by it, and
// the session ends once it is idle again.
func TestIdleSweepSparesABusySession(t *testing.T) {
	var s Registry
	u, err := s.Admit("alice")
	if err != nil {
		t.Fatal(err)
	}
	s.Open(u, "mcp-session-busy", 0)
	cutoff := time.Now().Add(time.Hour).UnixNano() // any session not busy is idle by it

	// The sweeper's first pass sees it idle; a request begins before it
	// comes back to end it.
	ids := s.Idle(cutoff, false)
	if len(ids) != 1 {
		t.Fatalf("idle: %v", ids)
	}
	if !u.Begin(1) {
		t.Fatal("begin on an open session failed")
	}
	if s.EndIdleHTTP(ids[0], cutoff) || u.ended.Load() || s.Lookup(ids[0]) == nil {
		t.Fatal("the sweeper ended a session with a request in progress")
	}
	u.Finish(2)
	if !s.EndIdleHTTP(ids[0], cutoff) || s.Lookup(ids[0]) != nil || u.Begin(3) {
		t.Fatal("an idle session was not ended")
	}
	if total, _ := s.Counts("alice"); total != 0 {
		t.Errorf("%d sessions counted after the sweep", total)
	}

	// The same, racing: requests begin and finish while the sweeper tries.
	u, err = s.Admit("alice")
	if err != nil {
		t.Fatal(err)
	}
	s.Open(u, "mcp-session-racing", 0)
	var wg, busy sync.WaitGroup
	var cutOff sync.Map
	for w := range 4 {
		busy.Add(1)
		wg.Go(func() {
			for i := range 20000 {
				if !u.Begin(1) {
					return
				}
				if u.ended.Load() {
					cutOff.Store(w, true)
				}
				if i == 0 {
					busy.Done()
				}
				u.Finish(1)
			}
		})
	}
	busy.Wait()
	tries := 1
	for ; !s.EndIdleHTTP("mcp-session-racing", cutoff); tries++ {
	}
	t.Logf("the racing session ended at the sweeper's try %d", tries)
	wg.Wait()
	cutOff.Range(func(w, _ any) bool {
		t.Errorf("worker %v saw its session ended under a request", w)
		return true
	})
}

// What a session's holders ask to happen at its end runs once, in the
// order asked, after whatever ended the session has returned (here the
// idle sweeper: a holder that waits for a child never holds it up); what
// was released never runs; a session that has ended refuses new holders.
func TestOnEndRunsOnceAfterTheSessionEnded(t *testing.T) {
	var s Registry
	defer s.Close()
	u, err := s.Admit("alice")
	if err != nil {
		t.Fatal(err)
	}
	s.Open(u, "mcp-session-held", 0)
	proceed, ran := make(chan struct{}), make(chan []string, 1)
	var order []string
	if _, ok := u.OnEnd(func() { <-proceed; order = append(order, "subscription") }); !ok {
		t.Fatal("an open session refused a holder")
	}
	release, _ := u.OnEnd(func() { order = append(order, "released") })
	u.OnEnd(func() { order = append(order, "task"); ran <- order })
	release()

	if !s.EndIdleHTTP("mcp-session-held", time.Now().Add(time.Hour).UnixNano()) {
		t.Fatal("the idle session was not ended")
	}
	close(proceed) // reached only if the sweep did not run the holders itself
	if got := <-ran; len(got) != 2 || got[0] != "subscription" || got[1] != "task" {
		t.Fatalf("ran %v, want [subscription task]", got)
	}
	if _, ok := u.OnEnd(func() { t.Error("a holder of an ended session ran") }); ok {
		t.Fatal("an ended session took a holder")
	}
	u.End() // ending again runs nothing again
}
