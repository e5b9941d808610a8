package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// scaleFigures prints the scale and restart figures of issue 8's targets.
func scaleFigures(ctx context.Context, o options, dir string) error {
	so := o.scaleOptions()
	fmt.Printf("\nScale and restart figures (medians of %d runs where timed):\n", so.reps)
	if err := idleFigure(ctx, o, so, dir); err != nil {
		return err
	}
	if err := bigChildFigures(ctx, o, so, dir); err != nil {
		return err
	}
	if err := firstListFigure(ctx, o, so, dir); err != nil {
		return err
	}
	if err := policyFigure(ctx, o, so, dir); err != nil {
		return err
	}
	fmt.Println("  catalog rebuild after a child's new catalog is read: not observable from outside mcpmux apart from the re-read;\n" +
		"    see go test -bench Catalog ./mux (bench/README.md).")
	return nil
}

func startMuxStdio(ctx context.Context, o options, dir, label string, mainArgs []string, n, extra int) (*running, string, error) {
	cfg, err := muxConfig(dir, o, mainArgs, n, extra)
	if err != nil {
		return nil, "", err
	}
	r, err := startProcess(ctx, dir, label, true, nil, o.mcpmux, "serve", "--config", cfg)
	return r, cfg, err
}

func idleFigure(ctx context.Context, o options, so scaleOptions, dir string) error {
	r, _, err := startMuxStdio(ctx, o, dir, "idle", []string{"-tools", "0"}, so.idleKids, 0)
	if err != nil {
		return err
	}
	defer r.close()
	if _, err := r.waitCatalog(ctx, 3*so.idleKids); err != nil {
		return fmt.Errorf("idle: %w", err)
	}
	time.Sleep(so.idle) // idling is what is measured
	m := measureTree(r.pid(), childComm)
	fmt.Printf("  idle, %d small children: mcpmux plus its %d helper processes %s MiB VmRSS (mcpmux %s MiB, helpers %s MiB); children %s MiB   goal: <= 25 MiB\n",
		so.idleKids, m.proxyProcs-1, mib(m.proxyRSS), mib(m.rootRSS), mib(m.proxyRSS-m.rootRSS), mib(m.treeRSS-m.proxyRSS))
	return nil
}

// bigChildFigures starts mcpmux with one large child, reads its RSS, then
// kills the child and times the respawn, so reps times; and times the
// child's cold start on its own, as often.
func bigChildFigures(ctx context.Context, o options, so scaleOptions, dir string) error {
	args := []string{"-tools", strconv.Itoa(so.bigTools)}
	var rss, hwm, respawn, total, cold []float64
	for rep := range so.reps {
		r, _, err := startMuxStdio(ctx, o, dir, fmt.Sprintf("big-%d", rep), args, 1, 0)
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
			rss, hwm = append(rss, m.rootRSS), append(hwm, m.rootHWM)

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
			respawn = append(respawn, ms(rd.at.Sub(g.at)-restartBackoff))
			total = append(total, ms(rd.at.Sub(killed)))
			return nil
		}()
		if err != nil {
			return fmt.Errorf("one %d-tool child: %w", so.bigTools+3, err)
		}
		c, err := coldStart(ctx, o, dir, fmt.Sprintf("cold-%d", rep), args, so.bigTools+3)
		if err != nil {
			return err
		}
		cold = append(cold, ms(c))
	}
	fmt.Printf("  one %d-tool child, after a tools/list and %d calls: mcpmux's own VmRSS %s MiB, VmHWM %s MiB   goal: <= 30 MiB\n",
		so.bigTools+3, so.warmupCalls, mib(median(rss)), mib(median(hwm)))
	fmt.Printf("  respawn of that child (SIGKILLed): ready %s ms after its loss was logged and the %s backoff (%s ms after the kill);\n"+
		"    its cold start on its own (exec to catalog read) %s ms   goal: respawn <= cold start + 20 ms\n",
		num(median(respawn)), restartBackoff, num(median(total)), num(median(cold)))
	return nil
}

// coldStart returns how long the child takes from exec to a full
// tools/list over stdio, with no mux in between.
func coldStart(ctx context.Context, o options, dir, label string, args []string, tools int) (time.Duration, error) {
	r, err := startProcess(ctx, dir, label, true, nil, o.echochild, args...)
	if err != nil {
		return 0, err
	}
	defer r.close()
	at, err := r.waitCatalog(ctx, tools)
	return at.Sub(r.started), err
}

func firstListFigure(ctx context.Context, o options, so scaleOptions, dir string) error {
	args := []string{"-tools", strconv.Itoa(so.firstTools)}
	want := so.firstKids * (so.firstTools + 3)
	var first, slowest []float64
	for rep := range so.reps {
		r, _, err := startMuxStdio(ctx, o, dir, fmt.Sprintf("first-%d", rep), args, so.firstKids, so.firstTools)
		if err != nil {
			return err
		}
		at, err := r.waitCatalog(ctx, want)
		r.close()
		if err != nil {
			return fmt.Errorf("first tools/list: %w", err)
		}
		first = append(first, ms(at.Sub(r.started)))

		// The children's cold starts, all at once as mcpmux starts them.
		colds := make([]time.Duration, so.firstKids)
		errs := make([]error, so.firstKids)
		var wg sync.WaitGroup
		for i := range colds {
			wg.Go(func() {
				colds[i], errs[i] = coldStart(ctx, o, dir, fmt.Sprintf("first-cold-%d-%d", rep, i), args, so.firstTools+3)
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
		slowest = append(slowest, ms(worst))
	}
	fmt.Printf("  %d children x %d tools: exec of mcpmux to its first complete tools/list %s ms; slowest of the children started\n"+
		"    together on their own %s ms   goal: <= slowest cold start + 50 ms\n",
		so.firstKids, so.firstTools+3, num(median(first)), num(median(slowest)))
	return nil
}

// policyFigure times a saved policy file to the list_changed mcpmux sends.
func policyFigure(ctx context.Context, o options, so scaleOptions, dir string) error {
	args := []string{"-tools", strconv.Itoa(so.manyTools)}
	r, cfg, err := startMuxStdio(ctx, o, dir, "policy", args, so.manyKids, so.manyTools)
	if err != nil {
		return err
	}
	defer r.close()
	if _, err := r.waitCatalog(ctx, so.manyKids*(so.manyTools+3)); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	changed := make(chan time.Time, 16)
	r.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			changed <- time.Now()
		}
	})
	pol := filepath.Join(filepath.Dir(cfg), "policies", "bench.toml")
	bodies := []string{"allow = [\"*\"]\ndeny = [\"c01__*\"]\n", "allow = [\"*\"]\n"}
	var lat []float64
	for i := range 2 * so.reps {
		// Saved as editors do: written aside, renamed over the old file.
		tmp := filepath.Join(filepath.Dir(cfg), "bench.toml.new")
		if err := os.WriteFile(tmp, []byte(bodies[i%2]), 0o644); err != nil {
			return err
		}
		saved := time.Now()
		if err := os.Rename(tmp, pol); err != nil {
			return err
		}
		select {
		case at := <-changed:
			lat = append(lat, ms(at.Sub(saved)))
		case <-time.After(30 * time.Second):
			return fmt.Errorf("policy: no list_changed within 30s of saving the policy\n%s", r.log.tail())
		}
	}
	fmt.Printf("  %d children x %d tools: policy file saved to list_changed received %s ms (median of %d saves)   goal: <= %s settle + 20 ms\n",
		so.manyKids, so.manyTools+3, num(median(lat)), len(lat), policySettle)
	return nil
}
