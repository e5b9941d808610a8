package childproc

import (
	"context"
	"sync"
	"testing"
)

// Many children started and exiting at once: mcpmux's reader releases each
// exited group while the supervisor answers spawns and reports exits, more
// datagrams each way than the socket holds (net.unix.max_dgram_qlen is 10).
// Neither side's reader ever waits on a send, so every Start and every exit
// goes through; with a reader that sent, both ended blocked in a send.
func TestSpawnStorm(t *testing.T) {
	s := supervised(t)
	const starters, each = 400, 5
	var wg sync.WaitGroup
	for range starters {
		wg.Go(func() {
			for range each {
				p, err := s.Start(context.Background(), Spec{Path: "true"})
				if err != nil {
					t.Errorf("start: %v", err)
					return
				}
				if err := p.ExitErr(); err != nil {
					t.Errorf("exit: %v", err)
				}
			}
		})
	}
	wg.Wait()
	c := s.sup
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.procs) != 0 || len(c.pending) != 0 || len(c.spawning) != 0 {
		t.Errorf("after every exit: %d running, %d pending, %d spawning", len(c.procs), len(c.pending), len(c.spawning))
	}
}
