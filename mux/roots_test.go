package mux

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// TestRootsListChanged: once a stdio client that declares roots has
// initialized, every child is told the roots changed, once, and one that
// then asks roots/list (outside any call) gets the client's roots; the
// client's own notifications/roots/list_changed reaches every child too.
func TestRootsListChanged(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := stdioUpstream(t, l.m, "alice", withAnswers("alice")...)
	for _, alias := range trafficChildren {
		l.waitRecord(t, alias, `roots {"roots":[{"uri":"file:///alice"`)
	}
	rootsListChanged(t, u)
	for _, alias := range trafficChildren {
		testsupport.WaitFor(t, alias+" to ask for the roots again", func() bool { return l.countRecord(alias, "roots {") == 2 })
		// The first notification came before the first answer, the
		// client's before the second: the handshake told each child once.
		if n := l.countRecord(alias, "roots-changed"); n != 2 {
			t.Errorf("%s was told the roots changed %d times, want 2", alias, n)
		}
	}
}
