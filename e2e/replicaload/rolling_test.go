package replicaload

import (
	"testing"
	"time"
)

// A rolling update under 16 callers: each replica in turn gets SIGTERM,
// drains (HAProxy's check on /readyz takes it out), exits, and is started
// again and ready before the next: no call fails.
func TestRollingUpdateUnderLoad(t *testing.T) {
	t.Parallel()
	l := newLoad(t)
	l.run(func() {
		settle := time.NewTicker(time.Second)
		defer settle.Stop()
		<-settle.C
		for i := range 3 {
			l.stopped(i, false, func(func()) { l.rs.Replace(i) })
			<-settle.C
		}
	})
	l.judge(true)
}
