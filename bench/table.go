package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

const (
	directStdio = "direct stdio"
	directHTTP  = "direct HTTP"
)

// childArgs are the arguments of the measured child.
func (o options) childArgs() []string {
	return []string{"-tools", strconv.Itoa(o.tools), "-page", strconv.Itoa(o.page)}
}

// muxConfig writes an mcpmux config with n children into a new directory
// under dir and returns its path: "main" is the measured child, c01... are
// small ones (echo, sleep_ms, big and extra synthetic tools each); the
// identity "bench" may call everything.
func muxConfig(dir string, o options, mainArgs []string, n, extra int) (string, error) {
	d, err := os.MkdirTemp(dir, "mux-"+strconv.Itoa(n)+"-")
	if err != nil {
		return "", err
	}
	pol := filepath.Join(d, "policies")
	if err := os.Mkdir(pol, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(pol, "bench.toml"), []byte("allow = [\"*\"]\n"), 0o644); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[mux]\npolicy_dir = %q\n", pol)
	if o.pinning != "" {
		fmt.Fprintf(&b, "pinning = %q\n", o.pinning)
	}
	b.WriteString("\n[upstream]\nidentity = \"bench\"\n")
	fmt.Fprintf(&b, "\n[servers.main]\ncommand = %q\nargs = %s\n", o.echochild, tomlList(mainArgs))
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "\n[servers.c%02d]\ncommand = %q\nargs = %s\n", i, o.echochild, tomlList([]string{"-tools", strconv.Itoa(extra)}))
	}
	cfg := filepath.Join(d, "mcpmux.toml")
	return cfg, os.WriteFile(cfg, []byte(b.String()), 0o644)
}

func tomlList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// targets returns what the main table measures, in the order of the first
// repetition.
func targets(o options, dir string) ([]*target, error) {
	tools := o.tools + 3
	ts := []*target{
		{name: directStdio, echo: "echo", big: "big", tools: tools,
			start: func(ctx context.Context, d string) (*running, error) {
				return startProcess(ctx, d, "direct-stdio", true, nil, o.echochild, o.childArgs()...)
			}},
		{name: directHTTP, echo: "echo", big: "big", tools: tools,
			start: func(ctx context.Context, d string) (*running, error) {
				return startProcess(ctx, d, "direct-http", false, listening, o.echochild, append(o.childArgs(), "-http", "127.0.0.1:0")...)
			}},
	}
	for _, http := range []bool{false, true} {
		for _, n := range o.children {
			cfg, err := muxConfig(dir, o, o.childArgs(), n, 0)
			if err != nil {
				return nil, err
			}
			t := &target{children: n, echo: "main__echo", big: "main__big", tools: tools + 3*(n-1)}
			label := fmt.Sprintf("mux-stdio-%d", n)
			t.name, t.base = "mcpmux stdio, "+plural(n, "child", "children"), directStdio
			args := []string{"serve", "--config", cfg}
			watch := (func(*watchLog) (<-chan logLine, func(string) string))(nil)
			if http {
				label = fmt.Sprintf("mux-http-%d", n)
				t.name, t.base = "mcpmux HTTP, "+plural(n, "child", "children"), directHTTP
				args, watch = append(args, "--listen", "127.0.0.1:0"), servingHTTP
			}
			t.start = func(ctx context.Context, d string) (*running, error) {
				return startProcess(ctx, d, label, !http, watch, o.mcpmux, args...)
			}
			ts = append(ts, t)
		}
	}
	for i, spec := range o.extraStdio {
		name, line, ok := strings.Cut(spec, "=")
		if !ok || strings.TrimSpace(line) == "" {
			return nil, fmt.Errorf("-extra-stdio %q: want NAME=COMMAND", spec)
		}
		line = strings.NewReplacer("{echochild}", o.echochild, "{tools}", strconv.Itoa(o.tools)).Replace(line)
		argv := strings.Fields(line)
		label := fmt.Sprintf("extra-stdio-%d", i)
		ts = append(ts, &target{name: name, base: directStdio, echo: o.extraName + "echo", big: o.extraName + "big", tools: tools,
			start: func(ctx context.Context, d string) (*running, error) {
				return startProcess(ctx, d, label, true, nil, argv[0], argv[1:]...)
			}})
	}
	for _, spec := range o.extraHTTP {
		name, url, ok := strings.Cut(spec, "=")
		if !ok || url == "" {
			return nil, fmt.Errorf("-extra-http %q: want NAME=URL", spec)
		}
		ts = append(ts, &target{name: name, base: directHTTP, echo: o.extraName + "echo", big: o.extraName + "big", tools: tools,
			start: func(ctx context.Context, _ string) (*running, error) { return connectURL(ctx, url) }})
	}
	return ts, nil
}

// mainTable measures every target once per repetition, in an order that
// rotates from one repetition to the next, and prints the tables.
func mainTable(ctx context.Context, o options, dir string) error {
	ts, err := targets(o, dir)
	if err != nil {
		return err
	}
	fmt.Printf("\nMain table: %d repetitions, interleaved; measured child: %d tools (echo, sleep_ms, big and %d synthetic), page size %d;\n",
		o.reps, o.tools+3, o.tools, o.page)
	fmt.Printf("per repetition: %d tools/list, %d serial calls (after %d warm-up), %d callers making %d calls, %d calls answering %d KiB.\n",
		o.w.lists, o.w.serial, max(o.w.serial/10, 1), o.w.conc, o.w.concCalls, o.w.bigCalls, o.w.bigBytes>>10)
	samples := make(map[string][]sample, len(ts))
	for rep := range o.reps {
		for i := range ts {
			t := ts[(i+rep)%len(ts)]
			s, err := measure(ctx, t, dir, o.w)
			if err != nil {
				return fmt.Errorf("repetition %d: %w", rep+1, err)
			}
			samples[t.name] = append(samples[t.name], s)
		}
		fmt.Fprintf(os.Stderr, "mcpbench: repetition %d of %d done\n", rep+1, o.reps)
	}
	printMedians(ts, samples)
	printTargets(o, ts, samples)
	return nil
}

func printMedians(ts []*target, samples map[string][]sample) {
	fmt.Println("\nMedians (ms are milliseconds; MiB are peak RSS, VmHWM summed over the process tree):")
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "target\t")
	for _, f := range figures {
		fmt.Fprintf(tw, "%s\t", f.name)
	}
	fmt.Fprintln(tw)
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t", t.name)
		ss := samples[t.name]
		for _, f := range figures {
			if f.mem && !ss[0].hasMem || f.proxy && t.children == 0 {
				fmt.Fprint(tw, "-\t")
				continue
			}
			fmt.Fprintf(tw, "%s\t", num(median(values(ss, f.get))))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func values(ss []sample, get func(sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = get(s)
	}
	return out
}

// ratio returns the median over repetitions of t's figure divided by its
// base's figure in the same repetition.
func ratio(samples map[string][]sample, t *target, get func(sample) float64) float64 {
	ts, bs := samples[t.name], samples[t.base]
	rs := make([]float64, 0, len(ts))
	for i := range ts {
		if b := get(bs[i]); b != 0 {
			rs = append(rs, get(ts[i])/b)
		}
	}
	return median(rs)
}

// check is one of issue 8's targets.
type check struct {
	what string
	goal string
	// value returns the figure for t, or NaN where the check does not
	// apply; ok says whether it meets the goal.
	value func(t *target) float64
	ok    func(v float64) bool
	unit  string
}

func printTargets(o options, ts []*target, samples map[string][]sample) {
	p50 := func(s sample) float64 { return ms(s.p50) }
	// The floor of an HTTP upstream: one HTTP hop and one stdio hop where
	// direct HTTP makes one HTTP hop.
	var floors []float64
	for i, h := range samples[directHTTP] {
		floors = append(floors, 1+p50(samples[directStdio][i])/p50(h))
	}
	floor := median(floors)
	via := func(base string, get func(sample) float64) func(t *target) float64 {
		return func(t *target) float64 {
			if t.base != base {
				return math.NaN()
			}
			return ratio(samples, t, get)
		}
	}
	atMost := func(g float64) func(float64) bool { return func(v float64) bool { return v <= g } }
	atLeast := func(g float64) func(float64) bool { return func(v float64) bool { return v >= g } }
	list := func(s sample) float64 { return ms(s.list) }
	tput := func(s sample) float64 { return s.callsPerSec }
	big := func(s sample) float64 { return s.mbPerSec }
	checks := []check{
		{what: "stdio serial p50 / direct", goal: "<= 2.0x", value: via(directStdio, p50), ok: atMost(2), unit: "x"},
		{what: "stdio serial p99 / direct", goal: "<= 2.5x", value: via(directStdio, func(s sample) float64 { return ms(s.p99) }), ok: atMost(2.5), unit: "x"},
		{what: fmt.Sprintf("stdio calls/s, %d callers / direct", o.w.conc), goal: ">= 0.6x", value: via(directStdio, tput), ok: atLeast(0.6), unit: "x"},
		{what: "HTTP serial p50 / direct HTTP", goal: fmt.Sprintf("<= %.2fx (floor)", floor), value: via(directHTTP, p50), ok: atMost(floor), unit: "x"},
		{what: fmt.Sprintf("HTTP calls/s, %d callers / direct HTTP", o.w.conc), goal: ">= 0.6x", value: via(directHTTP, tput), ok: atLeast(0.6), unit: "x"},
		{what: "stdio tools/list / direct", goal: "<= 0.7x", value: via(directStdio, list), ok: atMost(0.7), unit: "x"},
		{what: "HTTP tools/list / direct HTTP", goal: "(<= 0.7x)", value: via(directHTTP, list), ok: atMost(0.7), unit: "x"},
		{what: fmt.Sprintf("stdio %d KiB MB/s / direct", o.w.bigBytes>>10), goal: ">= 0.9x", value: via(directStdio, big), ok: atLeast(0.9), unit: "x"},
		{what: fmt.Sprintf("HTTP %d KiB MB/s / direct HTTP", o.w.bigBytes>>10), goal: "(>= 0.9x)", value: via(directHTTP, big), ok: atLeast(0.9), unit: "x"},
		{what: "mcpmux's own peak RSS, MiB (stdio)", goal: "<= 30 (1 child)", value: func(t *target) float64 {
			if t.base != directStdio || t.children == 0 {
				return math.NaN()
			}
			return median(values(samples[t.name], func(s sample) float64 { return s.mem.rootHWM }))
		}, ok: atMost(30)},
	}

	fmt.Printf("\nRatios: medians of per-repetition ratios to the same repetition's direct figure (stdio targets to direct stdio,\n"+
		"HTTP targets to direct HTTP); HTTP floor = median of 1 + direct stdio p50 / direct HTTP p50 = %.2fx.\n"+
		"A goal in parentheses is not in the issue's list but measured the same way. * marks a goal not met.\n", floor)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "figure\tgoal\t")
	var cols []*target
	for _, t := range ts {
		if t.base != "" {
			cols = append(cols, t)
		}
	}
	// Stdio and HTTP targets with the same children share a column.

	var names []string
	seen := map[string]bool{}
	for _, t := range cols {
		n := colName(t)
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
			fmt.Fprintf(tw, "%s\t", n)
		}
	}
	fmt.Fprintln(tw)
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t", c.what, c.goal)
		for _, n := range names {
			cell := "-"
			for _, t := range cols {
				if colName(t) != n {
					continue
				}
				if v := c.value(t); !math.IsNaN(v) {
					mark := ""
					// The memory goal is for one child only.
					if !c.ok(v) && (c.unit != "" || t.children == 1) {
						mark = "*"
					}
					cell = num(v) + c.unit + mark
				}
			}
			fmt.Fprintf(tw, "%s\t", cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// colName is the column of t in the ratio table: its children, or its own
// name for an extra target.
func colName(t *target) string {
	if t.children == 0 {
		return t.name
	}
	return "mcpmux, " + plural(t.children, "child", "children")
}

// num prints v with three significant digits, at most.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}
