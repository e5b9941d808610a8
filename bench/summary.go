package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
)

// printIssue15 prints issue 15's targets as one table: mcpmux (with the
// fewest children of -children) and TBXark/mcp-proxy at each protocol
// version, the first of -protocols being the one the targets are judged
// at; the others are shown beside it, with the same goals (issue 8's
// hold at every version). m or sc is nil when the main table or the
// scale figures were not run; their rows then show "-".
func printIssue15(o options, m *mainResults, sc *scaleResults) {
	n := slices.Min(o.children)
	muxStdio := "mcpmux stdio, " + plural(n, "child", "children")
	muxHTTP := "mcpmux HTTP, " + plural(n, "child", "children")
	tools := o.tools + 3

	// A row's cell for mcpmux at proto, and for TBXark.
	type cellFunc func(proto string) string
	type row struct {
		what, goal string
		mux, tbx   cellFunc
	}
	dash := func(string) string { return "-" }
	find := func(proto, name string) *target {
		if m == nil {
			return nil
		}
		return m.find(proto, name)
	}
	// fig formats a figure of the main table: get's value for the target
	// named name (via ratio or own), judged by ok (nil: not judged).
	fig := func(name string, own bool, get func(sample) float64, unit string, ok func(proto string, v float64) bool) cellFunc {
		return func(proto string) string {
			t := find(proto, name)
			if t == nil {
				return "-"
			}
			if t.lacks {
				return "n/a"
			}
			var v float64
			if own {
				v = m.own(t, get)
			} else {
				v = m.ratio(t, get)
			}
			if math.IsNaN(v) {
				return "n/a"
			}
			mark := ""
			if ok != nil && !ok(proto, v) {
				mark = "*"
			}
			return num(v) + unit + mark
		}
	}
	goal := func(f func(float64) bool) func(string, float64) bool {
		return func(_ string, v float64) bool { return f(v) }
	}
	// tbxRatio is TBXark's ratio of get at proto, NaN where not measured.
	tbxRatio := func(proto string, get func(sample) float64) float64 {
		t := find(proto, tbxarkName)
		if t == nil || t.lacks {
			return math.NaN()
		}
		return m.ratio(t, get)
	}
	floor := func(proto string) float64 {
		if m == nil {
			return math.NaN()
		}
		return m.floor(proto)
	}
	tbx := func(get func(sample) float64, own bool, unit string) cellFunc {
		if o.tbxark == "" {
			return dash
		}
		return fig(tbxarkName, own, get, unit, nil)
	}
	scaleCell := func(f func(e *scaleEra) string) cellFunc {
		return func(proto string) string {
			if sc == nil {
				return "-"
			}
			return f(sc.byEra[proto])
		}
	}
	c := o.w.conc
	rows := []row{
		{"stdio serial p50 / direct", "<= 2.0x", fig(muxStdio, false, getP50, "x", goal(atMost(2))), dash},
		{"stdio serial p99 / direct", "<= 2.5x", fig(muxStdio, false, getP99, "x", goal(atMost(2.5))), dash},
		{fmt.Sprintf("stdio calls/s, %d callers / direct", c), ">= 0.6x", fig(muxStdio, false, getTput, "x", goal(atLeast(0.6))), dash},
		{"  floor (linecopy): serial p50, calls/s / direct", "-", func(proto string) string {
			return fig(floorStdio, false, getP50, "x", nil)(proto) + ", " + fig(floorStdio, false, getTput, "x", nil)(proto)
		}, dash},
		{fmt.Sprintf("tools/list of %d / direct (stdio)", tools), "<= 0.7x", fig(muxStdio, false, getList, "x", goal(atMost(0.7))), dash},
		{fmt.Sprintf("HTTP tools/list of %d / direct HTTP", tools), "(<= 0.7x)", fig(muxHTTP, false, getList, "x", goal(atMost(0.7))), tbx(getList, false, "x")},
		{"HTTP floor: 1 + stdio p50 / HTTP p50 of direct", "-", func(proto string) string {
			if f := floor(proto); !math.IsNaN(f) {
				return num(f) + "x"
			}
			return "-"
		}, dash},
		{"HTTP serial p50 / direct HTTP", "<= floor, < TBXark", fig(muxHTTP, false, getP50, "x", func(proto string, v float64) bool {
			t := tbxRatio(proto, getP50)
			return v <= floor(proto) && (math.IsNaN(t) || v < t)
		}), tbx(getP50, false, "x")},
		{fmt.Sprintf("HTTP calls/s, %d callers / direct HTTP", c), ">= 0.6x, > TBXark", fig(muxHTTP, false, getTput, "x", func(proto string, v float64) bool {
			t := tbxRatio(proto, getTput)
			return v >= 0.6 && (math.IsNaN(t) || v > t)
		}), tbx(getTput, false, "x")},
		{fmt.Sprintf("peak RSS (VmHWM) of mcpmux, one %d-tool child, whole workload, MiB", tools), "<= 30",
			func(proto string) string {
				if n != 1 {
					return "-"
				}
				return fig(muxStdio, true, getHWM, "", goal(atMost(30)))(proto)
			}, tbx(getHWM, true, "")},
	}
	if sc != nil {
		rows = append(rows,
			row{fmt.Sprintf("peak RSS (VmHWM) of mcpmux, one %d-tool child, a list and %d calls, MiB", sc.so.bigTools+3, sc.so.warmupCalls), "<= 30",
				scaleCell(func(e *scaleEra) string { return mib(e.bigHWM) + mark(e.bigHWM <= 30) }), dash},
			row{"  its VmRSS after them, MiB", "(<= 30)",
				scaleCell(func(e *scaleEra) string { return mib(e.bigRSS) + mark(e.bigRSS <= 30) }), dash})
	} else {
		rows = append(rows, row{"peak RSS (VmHWM) of mcpmux, one child, a list and calls (-scale)", "<= 30", dash, dash})
	}
	rows = append(rows,
		row{"mcpmux's own CPU per serial call, stdio, us", "<= 60", fig(muxStdio, true, getCPU, "", goal(atMost(60))), dash},
		row{"mcpmux's own CPU per serial call, HTTP, us", "<= 60", fig(muxHTTP, true, getCPU, "", goal(atMost(60))), tbx(getCPU, true, "")},
		row{"  its helpers' CPU per serial call, stdio, us", "-", fig(muxStdio, true, getHelp, "", nil), dash},
		row{"  floor (linecopy): own CPU per serial call, stdio, us", "-", fig(floorStdio, true, getCPU, "", nil), dash},
		row{"  its helpers' CPU per serial call, HTTP, us", "-", fig(muxHTTP, true, getHelp, "", nil), tbx(getHelp, true, "")},
	)
	firstWhat := "first tools/list with 10 children (-scale), ms"
	if sc != nil {
		firstWhat = fmt.Sprintf("first tools/list with %d children x %d tools, ms", sc.so.firstKids, sc.so.firstTools+3)
	}
	rows = append(rows, row{firstWhat, "<= slowest cold + 50 ms", scaleCell(func(e *scaleEra) string {
		return fmt.Sprintf("%s (cold %s)%s", num(e.first), num(e.slowest), mark(e.first <= e.slowest+50))
	}), dash})

	judged := o.protocols[0]
	fmt.Printf("\nIssue 15's targets, judged at protocol %s", judged)
	if len(o.protocols) > 1 {
		fmt.Printf(" (%s beside it, held to the same goals)", strings.Join(o.protocols[1:], ", "))
	}
	fmt.Printf(": mcpmux with %s; ratios are medians of\nper-repetition ratios to the direct child at the same protocol version; * marks a goal not met; n/a: does not serve that version.\n",
		plural(n, "child", "children"))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "figure\ttarget\t")
	for _, p := range o.protocols {
		fmt.Fprintf(tw, "mcpmux %s\t", p)
		if o.tbxark != "" {
			fmt.Fprintf(tw, "TBXark %s\t", p)
		}
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t", r.what, r.goal)
		for _, p := range o.protocols {
			fmt.Fprintf(tw, "%s\t", r.mux(p))
			if o.tbxark != "" {
				fmt.Fprintf(tw, "%s\t", r.tbx(p))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// mark is "*" for a goal not met.
func mark(ok bool) string {
	if ok {
		return ""
	}
	return "*"
}
