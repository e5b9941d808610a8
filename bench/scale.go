package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Delays of mcpmux that the scale figures are read against: the first
// restart's backoff (mux.minBackoff) and the policy watcher's settle delay
// (policy.settleDelay).
const (
	restartBackoff = 100 * time.Millisecond
	policySettle   = 100 * time.Millisecond
)

// scaleOptions sizes the scale figures.
type scaleOptions struct {
	reps        int           // repetitions of each timed figure
	idle        time.Duration // how long mcpmux idles before its RSS is read
	bigTools    int           // synthetic tools of the one large child
	manyKids    int           // children of the policy figure
	manyTools   int           // synthetic tools of each of them
	firstKids   int           // children of the first-tools/list figure
	firstTools  int           // synthetic tools of each of them
	idleKids    int           // small children of the idle figure
	warmupCalls int
}

func (o options) scaleOptions() scaleOptions {
	if o.smoke {
		return scaleOptions{reps: 1, idle: 200 * time.Millisecond, bigTools: 200, manyKids: 5, manyTools: 20, firstKids: 3, firstTools: 20, idleKids: 3, warmupCalls: 10}
	}
	return scaleOptions{reps: 3, idle: 2 * time.Second, bigTools: 2002, manyKids: 50, manyTools: 197, firstKids: 10, firstTools: 197, idleKids: 10, warmupCalls: 200}
}

// scaleResults are the scale figures issue 15's table reads, per protocol
// version.
type scaleResults struct {
	so    scaleOptions
	byEra map[string]*scaleEra
}

// scaleEra is one protocol version's scale figures (medians).
type scaleEra struct {
	bigRSS, bigHWM float64 // mcpmux with one bigTools child, MiB
	first, slowest float64 // first complete tools/list, slowest cold start, ms
}

// scaleFigures prints the scale and restart figures of issues 8 and 15 at
// each protocol version, the versions interleaved in each repetition, and
// returns those issue 15's table reads.
func scaleFigures(ctx context.Context, o options, dir string) (*scaleResults, error) {
	so := o.scaleOptions()
	sc := &scaleResults{so: so, byEra: map[string]*scaleEra{}}
	for _, p := range o.protocols {
		sc.byEra[p] = &scaleEra{}
	}
	fmt.Printf("\nScale and restart figures (medians of %d runs where timed), at protocol %s:\n", so.reps, strings.Join(o.protocols, " and "))
	if err := idleFigure(ctx, o, so, dir); err != nil {
		return nil, err
	}
	if err := bigChildFigures(ctx, o, so, dir, sc); err != nil {
		return nil, err
	}
	if err := firstListFigure(ctx, o, so, dir, sc); err != nil {
		return nil, err
	}
	if err := policyFigure(ctx, o, so, dir); err != nil {
		return nil, err
	}
	fmt.Println("  catalog rebuild after a child's new catalog is read: not observable from outside mcpmux apart from the re-read;\n" +
		"    see go test -bench Catalog ./mux (bench/README.md).")
	return sc, nil
}

func startMuxStdio(ctx context.Context, o options, dir, label, proto string, mainArgs []string, n, extra int) (*running, string, error) {
	cfg, err := muxConfig(dir, o, mainArgs, n, extra)
	if err != nil {
		return nil, "", err
	}
	r, err := startProcess(ctx, dir, label+"-"+proto, proto, nil, o.mcpmux, "serve", "--config", cfg)
	return r, cfg, err
}

func idleFigure(ctx context.Context, o options, so scaleOptions, dir string) error {
	for _, proto := range o.protocols {
		r, _, err := startMuxStdio(ctx, o, dir, "idle", proto, []string{"-tools", "0"}, so.idleKids, 0)
		if err != nil {
			return err
		}
		if _, err := r.waitCatalog(ctx, 3*so.idleKids); err != nil {
			r.close()
			return fmt.Errorf("idle: %w", err)
		}
		time.Sleep(so.idle) // idling is what is measured
		m := measureTree(r.pid(), childComm)
		r.close()
		fmt.Printf("  %s idle, %d small children: mcpmux plus its %d helper processes %s MiB VmRSS (mcpmux %s MiB, helpers %s MiB);\n"+
			"    children %s MiB   goal: <= 25 MiB\n",
			proto, so.idleKids, m.proxyProcs-1, mib(m.proxyRSS), mib(m.rootRSS), mib(m.proxyRSS-m.rootRSS), mib(m.treeRSS-m.proxyRSS))
	}
	return nil
}

// bigChildFigures starts mcpmux with one large child, reads its RSS, then
// kills the child and times the respawn, so reps times at each protocol
// version; and times the child's cold start on its own, as often.
func bigChildFigures(ctx context.Context, o options, so scaleOptions, dir string, sc *scaleResults) error {
	args := []string{"-tools", strconv.Itoa(so.bigTools)}
	type figs struct{ rss, hwm, respawn, total, cold []float64 }
	byEra := map[string]*figs{}
	for _, p := range o.protocols {
		byEra[p] = &figs{}
	}
	for rep := range so.reps {
		for _, proto := range o.protocols {
			f := byEra[proto]
			r, _, err := startMuxStdio(ctx, o, dir, fmt.Sprintf("big-%d", rep), proto, args, 1, 0)
			if err != nil {
				return err
			}
			err = func() error {
				defer r.close()
				if _, err := r.waitCatalog(ctx, so.bigTools+3); err != nil {
					return err
				}
				for range so.warmupCalls {
					if _, err := r.c.CallTool(ctx, callReq("main__echo", map[string]any{"text": "hello"})); err != nil {
						return err
					}
				}
				m := measureTree(r.pid(), childComm)
				f.rss, f.hwm = append(f.rss, m.rootRSS), append(f.hwm, m.rootHWM)

				kids := descendantsNamed(r.pid(), childComm)
				if len(kids) != 1 {
					return fmt.Errorf("found %d echochild processes under mcpmux, want 1", len(kids))
				}
				gone := r.log.await(jsonMsg("server went away; restarting"))
				ready := r.log.await(jsonMsg("server ready"))
				killed := time.Now()
				if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
					return err
				}
				var g, rd logLine
				for _, w := range []struct {
					ch <-chan logLine
					to *logLine
				}{{gone, &g}, {ready, &rd}} {
					select {
					case *w.to = <-w.ch:
					case <-time.After(30 * time.Second):
						return fmt.Errorf("no respawn logged within 30s\n%s", r.log.tail())
					}
				}
				f.respawn = append(f.respawn, ms(rd.at.Sub(g.at)-restartBackoff))
				f.total = append(f.total, ms(rd.at.Sub(killed)))
				return nil
			}()
			if err != nil {
				return fmt.Errorf("one %d-tool child at %s: %w", so.bigTools+3, proto, err)
			}
			c, err := coldStart(ctx, o, dir, fmt.Sprintf("cold-%d-%s", rep, proto), proto, args, so.bigTools+3)
			if err != nil {
				return err
			}
			f.cold = append(f.cold, ms(c))
		}
	}
	for _, proto := range o.protocols {
		f := byEra[proto]
		sc.byEra[proto].bigRSS, sc.byEra[proto].bigHWM = median(f.rss), median(f.hwm)
		fmt.Printf("  %s one %d-tool child, after a tools/list and %d calls: mcpmux's own VmRSS %s MiB, VmHWM %s MiB   goal: <= 30 MiB\n",
			proto, so.bigTools+3, so.warmupCalls, mib(median(f.rss)), mib(median(f.hwm)))
		fmt.Printf("  %s respawn of that child (SIGKILLed): ready %s ms after its loss was logged and the %s backoff (%s ms after the kill);\n"+
			"    its cold start on its own (exec to catalog read) %s ms   goal: respawn <= cold start + 20 ms\n",
			proto, num(median(f.respawn)), restartBackoff, num(median(f.total)), num(median(f.cold)))
	}
	return nil
}

// coldStart returns how long the child takes from exec to a full
// tools/list over stdio, with no mux in between.
func coldStart(ctx context.Context, o options, dir, label, proto string, args []string, tools int) (time.Duration, error) {
	r, err := startProcess(ctx, dir, label, proto, nil, o.echochild, args...)
	if err != nil {
		return 0, err
	}
	defer r.close()
	at, err := r.waitCatalog(ctx, tools)
	return at.Sub(r.started), err
}

func firstListFigure(ctx context.Context, o options, so scaleOptions, dir string, sc *scaleResults) error {
	args := []string{"-tools", strconv.Itoa(so.firstTools)}
	want := so.firstKids * (so.firstTools + 3)
	first, slowest := map[string][]float64{}, map[string][]float64{}
	for rep := range so.reps {
		for _, proto := range o.protocols {
			r, _, err := startMuxStdio(ctx, o, dir, fmt.Sprintf("first-%d", rep), proto, args, so.firstKids, so.firstTools)
			if err != nil {
				return err
			}
			at, err := r.waitCatalog(ctx, want)
			r.close()
			if err != nil {
				return fmt.Errorf("first tools/list at %s: %w", proto, err)
			}
			first[proto] = append(first[proto], ms(at.Sub(r.started)))

			// The children's cold starts, all at once as mcpmux starts them.
			colds := make([]time.Duration, so.firstKids)
			errs := make([]error, so.firstKids)
			var wg sync.WaitGroup
			for i := range colds {
				wg.Go(func() {
					colds[i], errs[i] = coldStart(ctx, o, dir, fmt.Sprintf("first-cold-%d-%d-%s", rep, i, proto), proto, args, so.firstTools+3)
				})
			}
			wg.Wait()
			var worst time.Duration
			for i, c := range colds {
				if errs[i] != nil {
					return errs[i]
				}
				worst = max(worst, c)
			}
			slowest[proto] = append(slowest[proto], ms(worst))
		}
	}
	for _, proto := range o.protocols {
		e := sc.byEra[proto]
		e.first, e.slowest = median(first[proto]), median(slowest[proto])
		fmt.Printf("  %s %d children x %d tools: exec of mcpmux to its first complete tools/list %s ms; slowest of the children\n"+
			"    started together on their own %s ms   goal: <= slowest cold start + 50 ms (%s ms)%s\n",
			proto, so.firstKids, so.firstTools+3, num(e.first), num(e.slowest), num(e.slowest+50), missed(e.first <= e.slowest+50))
	}
	return nil
}

// missed marks a goal not met.
func missed(ok bool) string {
	if ok {
		return ""
	}
	return "   not met"
}

// policyFigure times a saved policy file to the list_changed mcpmux sends,
// at each protocol version in turn. From 2026-07-28 on a client receives
// list_changed only on a subscriptions/listen stream, which it opens (and
// sees acknowledged) before the first save.
func policyFigure(ctx context.Context, o options, so scaleOptions, dir string) error {
	for _, proto := range o.protocols {
		lat, err := policySaves(ctx, o, so, dir, proto)
		if err != nil {
			return fmt.Errorf("policy at %s: %w", proto, err)
		}
		fmt.Printf("  %s %d children x %d tools: policy file saved to list_changed received %s ms (median of %d saves)   goal: <= %s settle + 20 ms\n",
			proto, so.manyKids, so.manyTools+3, num(median(lat)), len(lat), policySettle)
	}
	return nil
}

func policySaves(ctx context.Context, o options, so scaleOptions, dir, proto string) ([]float64, error) {
	args := []string{"-tools", strconv.Itoa(so.manyTools)}
	r, cfg, err := startMuxStdio(ctx, o, dir, "policy", proto, args, so.manyKids, so.manyTools)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if _, err := r.waitCatalog(ctx, so.manyKids*(so.manyTools+3)); err != nil {
		return nil, err
	}
	changed := make(chan time.Time, 16)
	acked := make(chan struct{}, 1)
	r.c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case string(mcp.MethodNotificationToolsListChanged):
			select {
			case changed <- time.Now():
			default: // more than the saves asked for: not waited for
			}
		case mcp.MethodNotificationSubscriptionsAcknowledged:
			select {
			case acked <- struct{}{}:
			default:
			}
		}
	})
	if mcp.IsModernProtocol(proto) {
		listenErr := make(chan error, 1)
		stop, err := r.c.ListenAsync(ctx, mcp.SubscriptionFilter{ToolsListChanged: true}, func(err error) { listenErr <- err })
		if err != nil {
			return nil, fmt.Errorf("subscriptions/listen: %w", err)
		}
		defer stop()
		select {
		case <-acked:
		case err := <-listenErr:
			return nil, fmt.Errorf("subscriptions/listen: %w", err)
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("subscriptions/listen not acknowledged within 30s\n%s", r.log.tail())
		}
	}
	pol := filepath.Join(filepath.Dir(cfg), "policies", "bench.toml")
	bodies := []string{"allow = [\"*\"]\ndeny = [\"c01__*\"]\n", "allow = [\"*\"]\n"}
	var lat []float64
	for i := range 2 * so.reps {
		// Saved as editors do: written aside, renamed over the old file.
		tmp := filepath.Join(filepath.Dir(cfg), "bench.toml.new")
		if err := os.WriteFile(tmp, []byte(bodies[i%2]), 0o644); err != nil {
			return nil, err
		}
		saved := time.Now()
		if err := os.Rename(tmp, pol); err != nil {
			return nil, err
		}
		select {
		case at := <-changed:
			lat = append(lat, ms(at.Sub(saved)))
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("no list_changed within 30s of saving the policy\n%s", r.log.tail())
		}
	}
	return lat, nil
}
