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

// BenchmarkServerListChange measures, with 50 children behind one mcpmux
// over stdio, what one change of the server list costs the others: the p99
// of calls to them while one child is replaced (its env changed) against
// their p99 in a window of the same length without a reload, and how long
// after the save an added child's tools are listed (its cold start
// included).
//
//	go test -run '^$' -bench ServerListChange -benchtime 5x ./e2e/reload
func BenchmarkServerListChange(b *testing.B) {
	servers := make([]ts.Server, benchServers)
	for i := range servers {
		servers[i] = ts.Server{Alias: fmt.Sprintf("s%02d", i), Env: map[string]string{"GEN": "0"}}
	}
	lab := ts.NewLab(b, "", servers...)
	lab.WritePolicy(b, "reader", `allow = ["*"]`)
	m := ts.StartMux(b, lab)
	m.ToolNames()
	lc := watchListChanged(m)

	// load calls the children other than s00 from 4 callers until stop
	// is closed, and returns every call's latency.
	load := func(stop <-chan struct{}) []time.Duration {
		var mu sync.Mutex
		var all []time.Duration
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				var mine []time.Duration
				for n := c; ; n++ {
					select {
					case <-stop:
						mu.Lock()
						all = append(all, mine...)
						mu.Unlock()
						return
					default:
					}
					alias := servers[1+n%(benchServers-1)].Alias
					start := time.Now()
					if res, err := m.Call(alias+"__echo", map[string]any{"message": "x"}); err != nil || res.IsError {
						b.Errorf("%s__echo: %v %v", alias, err, res)
					}
					mine = append(mine, time.Since(start))
				}
			})
		}
		wg.Wait()
		return all
	}
	p99 := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)*99/100]
	}

	var quiet, reload, listed []time.Duration
	b.ResetTimer()
	for i := range b.N {
		// A window as long as the reload's, without one.
		stop := make(chan struct{})
		go func() { time.Sleep(time.Second); close(stop) }()
		quiet = append(quiet, p99(load(stop)))

		// One child replaced while the load runs; the window ends once
		// the new one has taken over.
		gen := strconv.Itoa(i + 1)
		servers[0].Env = map[string]string{"GEN": gen}
		reloads := len(m.Log.Lines(ts.Msg("config reloaded")))
		stop = make(chan struct{})
		done := make(chan []time.Duration)
		go func() { done <- load(stop) }()
		lab.Rewrite(b, "", servers...)
		ts.WaitFor(b, "the replacement", func() bool { return len(m.Log.Lines(ts.Msg("config reloaded"))) > reloads })
		close(stop)
		reload = append(reload, p99(<-done))

		// One child added: from the save to its tools in the list.
		added := ts.Server{Alias: "added" + gen}
		saved := time.Now()
		lab.Rewrite(b, "", append(slices.Clone(servers), added)...)
		waitTools(b, m, lc, "the added server", func(n []string) bool { return hasPrefix(n, added.Alias+"__") })
		listed = append(listed, time.Since(saved))
		lab.Rewrite(b, "", servers...)
		waitTools(b, m, lc, "the added server gone", func(n []string) bool { return !hasPrefix(n, added.Alias+"__") })
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(med(quiet), "p99-quiet-µs")
	b.ReportMetric(med(reload), "p99-reload-µs")
	b.ReportMetric(med(reload)/med(quiet), "p99-ratio")
	b.ReportMetric(med(listed)/1000, "added-listed-ms")
}
