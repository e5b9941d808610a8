package upstream

import (
	"context"
	"sync"
)

// CallTable holds the requests in flight that mcpmux answers itself of one
// 2025-11-25 HTTP session, by their ids' dup form: a second request under
// an id in flight is refused, and a cancellation finds its request.
type CallTable struct {
	mu    sync.Mutex
	calls map[string]context.CancelFunc
}

// Claim records a request under dup; false if one under it is in flight.
func (t *CallTable) Claim(dup string, cancel context.CancelFunc) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, taken := t.calls[dup]; taken {
		return false
	}
	if t.calls == nil {
		t.calls = map[string]context.CancelFunc{}
	}
	t.calls[dup] = cancel
	return true
}

func (t *CallTable) Release(dup string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.calls, dup)
}

// Cancel cancels the request under dup, if there is one.
func (t *CallTable) Cancel(dup string) bool {
	t.mu.Lock()
	c := t.calls[dup]
	t.mu.Unlock()
	if c != nil {
		c()
	}
	return c != nil
}
