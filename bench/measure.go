package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// workload is how much of each measurement one repetition makes.
type workload struct {
	lists     int // tools/list (all pages) repetitions
	serial    int // serial echo calls
	conc      int // concurrent callers
	concCalls int // calls made by all concurrent callers together
	bigCalls  int // large-result calls
	bigBytes  int // size of each large result
}

// sample is one repetition's figures for one target.
type sample struct {
	ready, init, list    time.Duration
	p50, p90, p99        time.Duration
	callsPerSec, concP99 float64
	mbPerSec             float64
	mem                  memory
	// cpu figures are microseconds of CPU per call: of the target's own
	// process and of its helpers (descendants that are not benchmark
	// children) over the serial calls, of its own over the concurrent ones.
	cpuSerial, cpuSerialHelpers, cpuConc float64
	// hasProc says the benchmark ran the target's process, so that mem
	// and cpu were read.
	hasProc bool
}

// figure is one column of the main table.
type figure struct {
	name string
	get  func(sample) float64
	// higher is better (throughput) rather than lower (latency, memory).
	higher bool
	// proc figures exist only for targets whose process the benchmark
	// runs; proxy figures only for targets with a proxy.
	proc, proxy bool
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var figures = []figure{
	{name: "ready ms", get: func(s sample) float64 { return ms(s.ready) }},
	{name: "init ms", get: func(s sample) float64 { return ms(s.init) }},
	{name: "list ms", get: func(s sample) float64 { return ms(s.list) }},
	{name: "p50 ms", get: func(s sample) float64 { return ms(s.p50) }},
	{name: "p90 ms", get: func(s sample) float64 { return ms(s.p90) }},
	{name: "p99 ms", get: func(s sample) float64 { return ms(s.p99) }},
	{name: "calls/s", get: func(s sample) float64 { return s.callsPerSec }, higher: true},
	{name: "conc p99", get: func(s sample) float64 { return s.concP99 }},
	{name: "big MB/s", get: func(s sample) float64 { return s.mbPerSec }, higher: true},
	{name: "tree MiB", get: func(s sample) float64 { return s.mem.treeHWM }, proc: true},
	{name: "proxy MiB", get: func(s sample) float64 { return s.mem.proxyHWM }, proc: true, proxy: true},
	{name: "cpu us", get: func(s sample) float64 { return s.cpuSerial }, proc: true},
	{name: "helpers us", get: func(s sample) float64 { return s.cpuSerialHelpers }, proc: true, proxy: true},
	{name: "conc cpu us", get: func(s sample) float64 { return s.cpuConc }, proc: true},
}

// measure starts t, runs the workload on it, reads its tree's memory and
// stops it.
func measure(ctx context.Context, t *target, dir string, w workload) (sample, error) {
	var s sample
	r, err := t.start(ctx, dir)
	if err != nil {
		return s, err
	}
	defer r.close()
	s.init = r.initDur
	readyAt, err := r.waitCatalog(ctx, t.tools)
	if err != nil {
		return s, fmt.Errorf("%s: %w", t.name, err)
	}
	s.ready = readyAt.Sub(r.started)
	fail := func(what string, err error) (sample, error) {
		if r.log != nil {
			return s, fmt.Errorf("%s: %s: %w\n%s", t.name, what, err, r.log.tail())
		}
		return s, fmt.Errorf("%s: %s: %w", t.name, what, err)
	}

	lists := make([]time.Duration, 0, w.lists)
	for range w.lists {
		begun := time.Now()
		res, err := r.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return fail("tools/list", err)
		}
		lists = append(lists, time.Since(begun))
		if len(res.Tools) < t.tools {
			return fail("tools/list", fmt.Errorf("%d tools, want %d", len(res.Tools), t.tools))
		}
	}
	s.list = medianDur(lists)

	echo := func() error {
		res, err := r.c.CallTool(ctx, callReq(t.echo, map[string]any{"text": "hello"}))
		if err == nil && (res.IsError || textOf(res) != "hello") {
			err = fmt.Errorf("echo answered %q (isError %v)", textOf(res), res.IsError)
		}
		return err
	}
	// Warm-up: connections, buffers and the runtime's heap reach their
	// working size before anything is timed.
	for range max(w.serial/10, 1) {
		if err := echo(); err != nil {
			return fail("warm-up call", err)
		}
	}
	pid := r.pid()
	cpuAt := func() treeCPU {
		if pid == 0 {
			return treeCPU{}
		}
		return readTreeCPU(pid, childComm)
	}
	cpu0 := cpuAt()
	serial := make([]time.Duration, 0, w.serial)
	for range w.serial {
		begun := time.Now()
		if err := echo(); err != nil {
			return fail("serial call", err)
		}
		serial = append(serial, time.Since(begun))
	}
	cpu1 := cpuAt()
	slices.Sort(serial)
	s.p50, s.p90, s.p99 = pct(serial, 50), pct(serial, 90), pct(serial, 99)
	s.cpuSerial = usPerCall(cpu0.own, cpu1.own, w.serial)
	s.cpuSerialHelpers = usPerCall(cpu0.helpers, cpu1.helpers, w.serial)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		all     = make([]time.Duration, 0, w.concCalls)
		callErr error
	)
	begun := time.Now()
	for i := range w.conc {
		n := w.concCalls / w.conc
		if i < w.concCalls%w.conc {
			n++
		}
		wg.Go(func() {
			mine := make([]time.Duration, 0, n)
			var err error
			for range n {
				b := time.Now()
				if err = echo(); err != nil {
					break
				}
				mine = append(mine, time.Since(b))
			}
			mu.Lock()
			all = append(all, mine...)
			if err != nil {
				callErr = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	wall := time.Since(begun)
	if callErr != nil {
		return fail("concurrent call", callErr)
	}
	cpu2 := cpuAt()
	s.cpuConc = usPerCall(cpu1.own, cpu2.own, w.concCalls)
	slices.Sort(all)
	s.callsPerSec = float64(len(all)) / wall.Seconds()
	s.concP99 = ms(pct(all, 99))

	begun = time.Now()
	for range w.bigCalls {
		res, err := r.c.CallTool(ctx, callReq(t.big, map[string]any{"bytes": w.bigBytes}))
		if err == nil && len(textOf(res)) != w.bigBytes {
			err = fmt.Errorf("big answered %d bytes, want %d", len(textOf(res)), w.bigBytes)
		}
		if err != nil {
			return fail("big call", err)
		}
	}
	s.mbPerSec = float64(w.bigCalls*w.bigBytes) / 1e6 / time.Since(begun).Seconds()

	if pid != 0 {
		s.mem, s.hasProc = measureTree(pid, childComm), true
	}
	return s, nil
}

func callReq(name string, args map[string]any) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return req
}

func textOf(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if t, ok := mcp.AsTextContent(res.Content[0]); ok {
		return t.Text
	}
	return ""
}

// pct returns the p-th percentile of sorted (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func medianDur(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return pct(s, 50)
}

// median of v; NaN-free input assumed, 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
