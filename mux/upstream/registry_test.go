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
