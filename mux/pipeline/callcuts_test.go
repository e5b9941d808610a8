package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// callCuts cuts every call in flight with the stop's cause, and a call
// added once stop has ended at once; a removed call is left alone.
func TestCallCuts(t *testing.T) {
	stop, end := context.WithCancelCause(context.Background())
	var c callCuts
	cause := errors.New("stopping")
	var calls []context.Context
	var removes []func()
	for range 50 {
		ctx, cut := context.WithCancelCause(context.Background())
		calls = append(calls, ctx)
		removes = append(removes, c.add(stop, cut))
	}
	kept, cutKept := context.WithCancelCause(context.Background())
	c.add(stop, cutKept)()
	var wg sync.WaitGroup
	for _, ctx := range calls {
		wg.Go(func() { <-ctx.Done() })
	}
	end(cause)
	wg.Wait()
	for i, ctx := range calls {
		if !errors.Is(context.Cause(ctx), cause) {
			t.Errorf("call %d: cause %v", i, context.Cause(ctx))
		}
		removes[i]()
	}
	if kept.Err() != nil {
		t.Error("a call removed before the stop was cut")
	}
	late, cutLate := context.WithCancelCause(context.Background())
	defer c.add(stop, cutLate)()
	if !errors.Is(context.Cause(late), cause) {
		t.Errorf("a call added after the stop: cause %v", context.Cause(late))
	}
	n := 0
	c.calls.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Errorf("%d calls left registered, want the late one", n)
	}
}
