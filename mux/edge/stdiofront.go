package edge

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// stdioFront runs the requests of the stdio client that mcpmux answers
// itself. Its goroutines are its own: ServeStdio stops them (close) and
// waits for them once mcp-go's Listen has returned.
type stdioFront struct {
	b  Backend
	u  *upstream.Session
	aw *answerWriter
	// base is the calls' context: the caller, and ServeStdio's end; stop
	// ends it.
	base context.Context
	stop context.CancelFunc
	sem  chan struct{} // the calls running: stdioCalls at most
	// waiting counts the calls waiting for a turn; beyond stdioQueue the
	// reader waits with them.
	waiting atomic.Int64
	meta    metaCache // the reader's alone
	wg      sync.WaitGroup

	// calls are the calls in flight by key (halfClose's), for the client's
	// notifications/cancelled; only this session takes mu.
	mu     sync.Mutex
	calls  map[string]context.CancelFunc
	closed bool // no call starts once end has begun

	// work hands a call to the goroutine of one that has ended and waits
	// for the next (idle of them, stdioIdleWorkers at most), so that serial
	// calls run on one goroutine and its grown stack rather than each on a
	// new one; workers counts those goroutines, which close waits for.
	work    chan func()
	idle    atomic.Int32
	workers sync.WaitGroup
}

// stdioIdleWorkers bounds the goroutines kept waiting for the next call.
const stdioIdleWorkers = 4

// spawn runs job on a waiting worker, or on a new one.
func (f *stdioFront) spawn(job func()) {
	select {
	case f.work <- job:
		return
	default:
	}
	f.workers.Add(1)
	go f.worker(job)
}

// worker runs job, then the calls handed to it while it waits, until
// enough others wait or the session ends.
func (f *stdioFront) worker(job func()) {
	defer f.workers.Done()
	for {
		job()
		if f.idle.Add(1) > stdioIdleWorkers {
			f.idle.Add(-1)
			return
		}
		select {
		case job = <-f.work:
			f.idle.Add(-1)
		case <-f.base.Done():
			f.idle.Add(-1)
			return
		}
	}
}

// serving returns how the front end answers fr, a request, if mcpmux
// answers it itself; nil for a request that goes on to mcp-go, which is
// then given hand instead of fr if hand is not nil (takes).
func (f *stdioFront) serving(fr *frame.Frame) (serve func(context.Context) []byte, hand []byte) {
	if serve := f.b.TaskResult(f.u, fr); serve != nil {
		return func(ctx context.Context) []byte { return serve(ctx, stdioOut{f}) }, nil
	}
	params, meta, perr, ok, hand := takes(f.base, fr, &f.meta, f.b)
	if !ok {
		return nil, hand
	}
	r := request(fr, params, meta, f.u, stdioOut{f})
	return func(ctx context.Context) []byte {
		if perr != nil {
			return frame.ErrorAnswer(r.ID, perr)
		}
		line, _ := f.b.Serve(ctx, r)
		return line
	}, nil
}

// run answers the request under key with what serve makes of it, on a
// goroutine of its own (a worker's, spawn) once a turn is free.
func (f *stdioFront) run(key string, serve func(context.Context) []byte) {
	f.mu.Lock()
	if f.closed || f.base.Err() != nil {
		// The session is ending: its answer would never be read.
		f.mu.Unlock()
		f.aw.answer(key, nil)
		return
	}
	ctx, cancel := context.WithCancel(f.base)
	if f.calls == nil {
		f.calls = map[string]context.CancelFunc{}
	}
	f.calls[key] = cancel
	f.wg.Add(1)
	f.mu.Unlock()
	queued := f.waiting.Add(1) > stdioQueue
	if queued {
		f.sem <- struct{}{} // the reader waits its turn too
	}
	f.spawn(func() {
		defer f.wg.Done()
		turn := queued
		if !queued {
			select {
			case f.sem <- struct{}{}:
				turn = true
			case <-ctx.Done():
			}
		}
		f.waiting.Add(-1)
		if turn {
			defer func() { <-f.sem }()
		}
		defer cancel()
		ans := serve(ctx)
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		f.aw.answer(key, ans)
	})
}

// cancelled cancels the call in flight under key, if there is one.
func (f *stdioFront) cancelled(key string) {
	f.mu.Lock()
	cancel := f.calls[key]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// end starts no call from now on and ends the calls in flight: the reader
// calls it when the input ends, when mcp-go cancels its own requests.
func (f *stdioFront) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cancel := range f.calls {
		cancel()
	}
}

// close ends every call's context, once Listen has returned, and waits for
// their answers.
func (f *stdioFront) close() {
	f.end()
	f.stop()
	f.wg.Wait()
	f.workers.Wait()
}

// stdioOut is the stdio client's edge as a request's (and its session's)
// requestOut: what mcpmux sends it is written at once, between the lines
// mcp-go writes.
type stdioOut struct{ f *stdioFront }

func (o stdioOut) Notify(line []byte) { o.f.aw.writeOwn(line) }

func (o stdioOut) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return o.f.u.Asks.Ask(ctx, func(line []byte) error {
		o.f.aw.writeOwn(line)
		return nil
	}, method, params)
}
