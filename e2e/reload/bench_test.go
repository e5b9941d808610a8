package reload

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// benchServers is how many children the reload benchmark runs.
const benchServers = 50

// benchWindow is how long each measured window lasts: one change of the
// list, from its save, is over well within it.
const benchWindow = time.Second

// benchPace is how often each of the 4 callers calls: 800 calls a second
// in all, a load the 2-core CI machine carries without queueing, so that
// a pause shows rather than the CPU a change takes.
const benchPace = 5 * time.Millisecond

// BenchmarkServerListChange measures, with 50 children behind one mcpmux
// over stdio, what one change of the server list costs the others: the p99
// of calls to them in the second after a save that changes one child
// against their p99 in a second without a change (all windows pooled), and
// how long after the save an added child's tools are listed, less its cold
// start (start_ms of its "server ready": spawned, initialized, lists
// read). Every wait is on an event, never a poll of the log, which would
// take the test's CPU in one window and not the other.
//
//	go test -run '^$' -bench ServerListChange -benchtime 5x ./e2e/reload
func BenchmarkServerListChange(b *testing.B) {
	for _, mode := range []string{"replace", "reexpose"} {
		b.Run(mode, func(b *testing.B) { benchListChange(b, mode) })
	}
}

// sample is one call of the load: when it started and how long it took.
type sample struct {
	start time.Time
	took  time.Duration
}

// benchListChange is the benchmark of one kind of change of s00: replace
// (its env changed: a new child) or reexpose (its hide changed).
func benchListChange(b *testing.B, mode string) {
	servers := make([]ts.Server, benchServers)
	for i := range servers {
		servers[i] = ts.Server{Alias: fmt.Sprintf("s%02d", i), Env: map[string]string{"GEN": "0"}}
	}
	lab := ts.NewLab(b, "", servers...)
	lab.WritePolicy(b, "reader", `allow = ["*"]`)
	m := ts.StartMux(b, lab)
	m.ToolNames()
	lc := watchListChanged(m)

	// load calls the children other than s00 from 4 callers, each every
	// benchPace, for benchWindow, and returns every call's start and
	// latency.
	load := func() []sample {
		var mu sync.Mutex
		var all []sample
		var wg sync.WaitGroup
		end := time.Now().Add(benchWindow)
		for c := range 4 {
			wg.Go(func() {
				var mine []sample
				tick := time.NewTicker(benchPace)
				defer tick.Stop()
				for n := c; time.Now().Before(end); n++ {
					<-tick.C
					alias := servers[1+n%(benchServers-1)].Alias
					start := time.Now()
					if res, err := m.Call(alias+"__echo", map[string]any{"message": "x"}); err != nil || res.IsError {
						b.Errorf("%s__echo: %v %v", alias, err, res)
					}
					mine = append(mine, sample{start, time.Since(start)})
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		return all
	}

	var quiet, reload, during, listed, beyond []time.Duration
	b.ResetTimer()
	for i := range b.N {
		for _, s := range load() {
			quiet = append(quiet, s.took)
		}

		// One change of s00 while the load runs; the reload must be over
		// within the window.
		if mode == "replace" {
			servers[0].Env = map[string]string{"GEN": strconv.Itoa(i + 1)}
		} else if servers[0].Hide == nil {
			servers[0].Hide = []string{"echo"}
		} else {
			servers[0].Hide = nil
		}
		mark := m.Log.Mark()
		done := make(chan []sample)
		go func() { done <- load() }()
		saved := time.Now()
		lab.Rewrite(b, "", servers...)
		m.Log.WaitLineAfter(b, mark, "the change", ts.Msg("config reloaded"))
		over := time.Now()
		for _, s := range <-done {
			reload = append(reload, s.took)
			if !s.start.Before(saved) && s.start.Before(over) {
				during = append(during, s.took)
			}
		}

		// One child added: from the save to its tools in the list.
		added := ts.Server{Alias: "added" + strconv.Itoa(i)}
		mark = m.Log.Mark()
		saved = time.Now()
		lab.Rewrite(b, "", append(slices.Clone(servers), added)...)
		waitTools(b, m, lc, "the added server", func(n []string) bool { return hasPrefix(n, added.Alias+"__") })
		took := time.Since(saved)
		ready := m.Log.WaitLineAfter(b, mark, "the added server's start", ts.Msg("server ready", "server", added.Alias))
		start, _ := ready["start_ms"].(float64)
		listed = append(listed, took)
		beyond = append(beyond, took-time.Duration(start*float64(time.Millisecond)))
		lab.Rewrite(b, "", servers...)
		waitTools(b, m, lc, "the added server gone", func(n []string) bool { return !hasPrefix(n, added.Alias+"__") })
	}
	b.StopTimer()
	pct := func(d []time.Duration, p int) time.Duration {
		slices.Sort(d)
		return d[len(d)*p/100]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(float64(len(quiet))/(float64(b.N)*benchWindow.Seconds()), "calls/s")
	b.ReportMetric(ms(pct(quiet, 99)), "p99-quiet-ms")
	b.ReportMetric(ms(pct(reload, 99)), "p99-change-ms")
	b.ReportMetric(float64(pct(reload, 99))/float64(pct(quiet, 99)), "p99-ratio")
	// The calls that started between the save and the reload's end alone:
	// fewer, so their p99 is nearer their maximum.
	b.ReportMetric(ms(pct(during, 99)), "p99-during-ms")
	b.ReportMetric(float64(len(during)), "calls-during")
	b.ReportMetric(ms(pct(listed, 50)), "added-listed-ms")
	b.ReportMetric(ms(pct(beyond, 50)), "added-beyond-start-ms")
}
