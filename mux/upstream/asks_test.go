package upstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// An ask waits for its client only as long as the client's session lasts:
// one waiting when the session ends, under a context that never ends (a
// child's request outside any call), returns ErrSessionEnded, and one made
// after that returns it without being sent.
func TestAsksEndWithTheSession(t *testing.T) {
	u := &Session{Kind: KindStdio}
	sent := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := u.Asks.Ask(context.Background(), func([]byte) error { close(sent); return nil }, "roots/list", nil)
		done <- err
	}()
	<-sent
	u.End()
	select {
	case err := <-done:
		if !errors.Is(err, ErrSessionEnded) {
			t.Errorf("the waiting ask returned %v, want ErrSessionEnded", err)
		}
	case <-time.After(testsupport.Wait):
		t.Fatal("the ask still waits after its session ended")
	}
	_, err := u.Asks.Ask(context.Background(), func([]byte) error {
		t.Error("an ask of an ended session was sent")
		return nil
	}, "roots/list", nil)
	if !errors.Is(err, ErrSessionEnded) {
		t.Errorf("an ask after the end returned %v, want ErrSessionEnded", err)
	}
}
