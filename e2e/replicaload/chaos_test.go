package replicaload

import (
	"testing"
	"time"
)

// Every 5 s one replica is SIGKILLed and started again on its ports, each
// in turn, under 16 callers: only the calls in flight at a kill fail, and a
// 2025-11-25 session the killed replica owned initializes again on 404.
func TestKillUnderLoad(t *testing.T) {
	t.Parallel()
	l := newLoad(t)
	l.run(func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for i := range 3 {
			<-tick.C
			victim := i % 3
			l.stopped(victim, true, func(gone func()) {
				l.rs.Kill(victim)
				gone()
				l.rs.Start(victim)
				l.rs.WaitReady(victim)
			})
		}
		<-tick.C
	})
	l.judge(false)
}
