package main

import (
	"context"
	"errors"
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
	// floorStdio is linecopy in front of the child: what a Go process
	// between the two costs before it does anything.
	floorStdio = "floor: linecopy"
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

// targets returns what the main table measures: every kind of target at
// every protocol version of -protocols, the versions of one kind next to
// each other, in the order of the first repetition.
func targets(o options, dir string) ([]*target, error) {
	tools := o.tools + 3
	var kinds []func(proto string) *target
	kinds = append(kinds,
		func(proto string) *target {
			return &target{name: directStdio, proto: proto, kind: kindDirect, echo: "echo", big: "big", tools: tools,
				start: func(ctx context.Context, d string) (*running, error) {
					return startProcess(ctx, d, "direct-stdio-"+proto, proto, nil, o.echochild, o.childArgs()...)
				}}
		},
		func(proto string) *target {
			return &target{name: floorStdio, proto: proto, base: directStdio, kind: kindFloor, echo: "echo", big: "big", tools: tools,
				start: func(ctx context.Context, d string) (*running, error) {
					return startProcess(ctx, d, "linecopy-"+proto, proto, nil, o.linecopy, append([]string{o.echochild}, o.childArgs()...)...)
				}}
		},
		func(proto string) *target {
			return &target{name: directHTTP, proto: proto, kind: kindDirect, echo: "echo", big: "big", tools: tools,
				start: func(ctx context.Context, d string) (*running, error) {
					return startProcess(ctx, d, "direct-http-"+proto, proto, listening, o.echochild, append(o.childArgs(), "-http", "127.0.0.1:0")...)
				}}
		})
	for _, http := range []bool{false, true} {
		for _, n := range o.children {
			cfg, err := muxConfig(dir, o, o.childArgs(), n, 0)
			if err != nil {
				return nil, err
			}
			kinds = append(kinds, func(proto string) *target {
				t := &target{proto: proto, kind: kindMux, children: n, echo: "main__echo", big: "main__big", tools: tools + 3*(n-1)}
				label := fmt.Sprintf("mux-stdio-%d-%s", n, proto)
				t.name, t.base = "mcpmux stdio, "+plural(n, "child", "children"), directStdio
				args := []string{"serve", "--config", cfg}
				var ready httpReady
				if http {
					label = fmt.Sprintf("mux-http-%d-%s", n, proto)
					t.name, t.base = "mcpmux HTTP, "+plural(n, "child", "children"), directHTTP
					args, ready = append(args, "--listen", "127.0.0.1:0"), servingHTTP
				}
				t.start = func(ctx context.Context, d string) (*running, error) {
					return startProcess(ctx, d, label, proto, ready, o.mcpmux, args...)
				}
				return t
			})
		}
	}
	if o.tbxark != "" {
		cfg, err := tbxarkConfig(dir, o.echochild, o.childArgs())
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, func(proto string) *target {
			return &target{name: tbxarkName, proto: proto, base: directHTTP, kind: kindTBXark, children: 1,
				echo: "echo", big: "big", tools: tools, mayLack: true,
				start: func(ctx context.Context, d string) (*running, error) {
					return startProcess(ctx, d, "tbxark-"+proto, proto, tbxarkReady, o.tbxark, "-config", cfg, "-expand-env=false")
				}}
		})
	}
	for i, spec := range o.extraStdio {
		name, line, ok := strings.Cut(spec, "=")
		if !ok || strings.TrimSpace(line) == "" {
			return nil, fmt.Errorf("-extra-stdio %q: want NAME=COMMAND", spec)
		}
		line = strings.NewReplacer("{echochild}", o.echochild, "{tools}", strconv.Itoa(o.tools)).Replace(line)
		argv := strings.Fields(line)
		kinds = append(kinds, func(proto string) *target {
			label := fmt.Sprintf("extra-stdio-%d-%s", i, proto)
			return &target{name: name, proto: proto, base: directStdio, kind: kindExtra, echo: o.extraName + "echo", big: o.extraName + "big", tools: tools, mayLack: true,
				start: func(ctx context.Context, d string) (*running, error) {
					return startProcess(ctx, d, label, proto, nil, argv[0], argv[1:]...)
				}}
		})
	}
	for _, spec := range o.extraHTTP {
		name, url, ok := strings.Cut(spec, "=")
		if !ok || url == "" {
			return nil, fmt.Errorf("-extra-http %q: want NAME=URL", spec)
		}
		kinds = append(kinds, func(proto string) *target {
			return &target{name: name, proto: proto, base: directHTTP, kind: kindExtra, echo: o.extraName + "echo", big: o.extraName + "big", tools: tools, mayLack: true,
				start: func(ctx context.Context, _ string) (*running, error) { return connectURL(ctx, url, proto) }}
		})
	}
	var ts []*target
	for _, k := range kinds {
		for _, proto := range o.protocols {
			ts = append(ts, k(proto))
		}
	}
	return ts, nil
}

// mainResults is what the main table measured: each target's samples, one
// per repetition (none for a target that lacks its protocol version).
type mainResults struct {
	ts      []*target
	samples map[targetKey][]sample
}

// find returns the target named name at proto, or nil.
func (m *mainResults) find(proto, name string) *target {
	for _, t := range m.ts {
		if t.proto == proto && t.name == name {
			return t
		}
	}
	return nil
}

// mainTable measures every target once per repetition, in an order that
// rotates from one repetition to the next, and prints a table of medians
// and one of ratios per protocol version.
func mainTable(ctx context.Context, o options, dir string) (*mainResults, error) {
	ts, err := targets(o, dir)
	if err != nil {
		return nil, err
	}
	fmt.Printf("\nMain table: %d repetitions, interleaved, of every target at protocol %s; measured child: %d tools (echo, sleep_ms, big\n"+
		"and %d synthetic), page size %d; per repetition: %d tools/list, %d serial calls (after %d warm-up), %d callers making %d calls,\n"+
		"%d calls answering %d KiB.\n",
		o.reps, strings.Join(o.protocols, " and "), o.tools+3, o.tools, o.page, o.w.lists, o.w.serial, max(o.w.serial/10, 1),
		o.w.conc, o.w.concCalls, o.w.bigCalls, o.w.bigBytes>>10)
	m := &mainResults{ts: ts, samples: make(map[targetKey][]sample, len(ts))}
	for rep := range o.reps {
		for i := range ts {
			t := ts[(i+rep)%len(ts)]
			if t.lacks {
				continue
			}
			s, err := measure(ctx, t, dir, o.w)
			if err != nil {
				if t.mayLack && errors.Is(err, errEraUnsupported) {
					t.lacks = true
					fmt.Fprintf(os.Stderr, "mcpbench: %s does not serve protocol %s (n/a): %v\n", t.name, t.proto, firstLine(err))
					continue
				}
				return nil, fmt.Errorf("repetition %d: %s at %s: %w", rep+1, t.name, t.proto, err)
			}
			m.samples[t.key()] = append(m.samples[t.key()], s)
		}
		fmt.Fprintf(os.Stderr, "mcpbench: repetition %d of %d done\n", rep+1, o.reps)
	}
	for _, proto := range o.protocols {
		printMedians(o, m, proto)
		printRatios(o, m, proto)
	}
	return m, nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func printMedians(o options, m *mainResults, proto string) {
	fmt.Printf("\nMedians at protocol %s (ms are milliseconds; MiB are peak RSS, VmHWM summed over the process tree;\n"+
		"cpu us is the CPU time (utime+stime) of the target's own process per serial call, helpers us that of its helper processes,\n"+
		"conc cpu us the own per call of the %d callers, in microseconds; one clock tick over %d serial calls is %s us):\n",
		proto, o.w.conc, o.w.serial, num(1e6/clockTicks/float64(o.w.serial)))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "target\t")
	for _, f := range figures {
		fmt.Fprintf(tw, "%s\t", f.name)
	}
	fmt.Fprintln(tw)
	for _, t := range m.ts {
		if t.proto != proto {
			continue
		}
		fmt.Fprintf(tw, "%s\t", t.name)
		ss := m.samples[t.key()]
		for _, f := range figures {
			switch {
			case len(ss) == 0:
				fmt.Fprint(tw, "n/a\t")
			case f.proc && !ss[0].hasProc || f.proxy && !t.proxied():
				fmt.Fprint(tw, "-\t")
			default:
				fmt.Fprintf(tw, "%s\t", num(median(values(ss, f.get))))
			}
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
// base's figure (at the same protocol version) in the same repetition, or
// NaN if t has no samples.
func (m *mainResults) ratio(t *target, get func(sample) float64) float64 {
	ts, bs := m.samples[t.key()], m.samples[targetKey{t.proto, t.base}]
	if len(ts) == 0 || len(bs) != len(ts) {
		return math.NaN()
	}
	rs := make([]float64, 0, len(ts))
	for i := range ts {
		if b := get(bs[i]); b != 0 {
			rs = append(rs, get(ts[i])/b)
		}
	}
	return median(rs)
}

// own returns the median of t's own figure, or NaN if it has none.
func (m *mainResults) own(t *target, get func(sample) float64) float64 {
	ss := m.samples[t.key()]
	if len(ss) == 0 || !ss[0].hasProc {
		return math.NaN()
	}
	return median(values(ss, get))
}

// floor returns the HTTP floor at proto: the median of 1 + direct stdio
// p50 / direct HTTP p50, one HTTP hop and one stdio hop where direct HTTP
// makes one HTTP hop.
func (m *mainResults) floor(proto string) float64 {
	var floors []float64
	ds := m.samples[targetKey{proto, directStdio}]
	for i, h := range m.samples[targetKey{proto, directHTTP}] {
		if i < len(ds) && h.p50 > 0 {
			floors = append(floors, 1+ms(ds[i].p50)/ms(h.p50))
		}
	}
	if len(floors) == 0 {
		return math.NaN()
	}
	return median(floors)
}

// Figures the tables take ratios and medians of.
var (
	getP50   = func(s sample) float64 { return ms(s.p50) }
	getP99   = func(s sample) float64 { return ms(s.p99) }
	getList  = func(s sample) float64 { return ms(s.list) }
	getTput  = func(s sample) float64 { return s.callsPerSec }
	getBig   = func(s sample) float64 { return s.mbPerSec }
	getHWM   = func(s sample) float64 { return s.mem.rootHWM }
	getCPU   = func(s sample) float64 { return s.cpuSerial }
	getHelp  = func(s sample) float64 { return s.cpuSerialHelpers }
	getCCPU  = func(s sample) float64 { return s.cpuConc }
	noTarget = func(float64) bool { return true }
)

// check is one row of a ratio table.
type check struct {
	what, goal string
	// base: the row is for targets compared with this direct target.
	base string
	get  func(sample) float64
	// own: the row is the median of the proxy's own figure (proxied
	// targets only), not the median of ratios to base.
	own bool
	// ok says whether a figure meets the goal; unit follows the figure.
	ok   func(v float64) bool
	unit string
	// oneChild: the goal is for mcpmux with one child only.
	oneChild bool
}

func (c check) applies(t *target) bool { return t.base == c.base && (!c.own || t.proxied()) }

func (c check) value(m *mainResults, t *target) float64 {
	if c.own {
		return m.own(t, c.get)
	}
	return m.ratio(t, c.get)
}

// cell formats c's figure for t: "-" where the row does not apply, n/a
// where t does not serve the protocol version, a * after a figure of
// mcpmux that misses the goal.
func (c check) cell(m *mainResults, t *target) string {
	if !c.applies(t) {
		return "-"
	}
	v := c.value(m, t)
	if t.lacks || math.IsNaN(v) {
		return "n/a"
	}
	mark := ""
	if t.kind == kindMux && !c.ok(v) && (!c.oneChild || t.children == 1) {
		mark = "*"
	}
	return num(v) + c.unit + mark
}

// printRatios prints, for proto, the figures of issue 8's targets (and
// issue 15's CPU) for every target that has a base, mcpmux's stdio and
// HTTP targets with the same children sharing a column.
func printRatios(o options, m *mainResults, proto string) {
	floor := m.floor(proto)
	checks := []check{
		{what: "stdio serial p50 / direct", goal: "<= 2.0x", base: directStdio, get: getP50, ok: atMost(2), unit: "x"},
		{what: "stdio serial p99 / direct", goal: "<= 2.5x", base: directStdio, get: getP99, ok: atMost(2.5), unit: "x"},
		{what: fmt.Sprintf("stdio calls/s, %d callers / direct", o.w.conc), goal: ">= 0.6x", base: directStdio, get: getTput, ok: atLeast(0.6), unit: "x"},
		{what: "HTTP serial p50 / direct HTTP", goal: fmt.Sprintf("<= %.2fx (floor)", floor), base: directHTTP, get: getP50, ok: atMost(floor), unit: "x"},
		{what: fmt.Sprintf("HTTP calls/s, %d callers / direct HTTP", o.w.conc), goal: ">= 0.6x", base: directHTTP, get: getTput, ok: atLeast(0.6), unit: "x"},
		{what: "stdio tools/list / direct", goal: "<= 0.7x", base: directStdio, get: getList, ok: atMost(0.7), unit: "x"},
		{what: "HTTP tools/list / direct HTTP", goal: "(<= 0.7x)", base: directHTTP, get: getList, ok: atMost(0.7), unit: "x"},
		{what: fmt.Sprintf("stdio %d KiB MB/s / direct", o.w.bigBytes>>10), goal: ">= 0.9x", base: directStdio, get: getBig, ok: atLeast(0.9), unit: "x"},
		{what: fmt.Sprintf("HTTP %d KiB MB/s / direct HTTP", o.w.bigBytes>>10), goal: "(>= 0.9x)", base: directHTTP, get: getBig, ok: atLeast(0.9), unit: "x"},
		{what: "own peak RSS, MiB (stdio)", goal: "<= 30 (1 child)", base: directStdio, get: getHWM, own: true, ok: atMost(30), oneChild: true},
		{what: "own peak RSS, MiB (HTTP)", goal: "(<= 30, 1 child)", base: directHTTP, get: getHWM, own: true, ok: atMost(30), oneChild: true},
		{what: "own CPU per serial call, us (stdio)", goal: "<= 60", base: directStdio, get: getCPU, own: true, ok: atMost(60)},
		{what: "own CPU per serial call, us (HTTP)", goal: "<= 60", base: directHTTP, get: getCPU, own: true, ok: atMost(60)},
		{what: "helpers' CPU per serial call, us (stdio)", goal: "-", base: directStdio, get: getHelp, own: true, ok: noTarget},
		{what: "helpers' CPU per serial call, us (HTTP)", goal: "-", base: directHTTP, get: getHelp, own: true, ok: noTarget},
		{what: fmt.Sprintf("own CPU per call, %d callers, us (stdio)", o.w.conc), goal: "-", base: directStdio, get: getCCPU, own: true, ok: noTarget},
		{what: fmt.Sprintf("own CPU per call, %d callers, us (HTTP)", o.w.conc), goal: "-", base: directHTTP, get: getCCPU, own: true, ok: noTarget},
	}

	fmt.Printf("\nRatios at protocol %s: medians of per-repetition ratios to the same repetition's direct figure at %s\n"+
		"(stdio targets to direct stdio, HTTP targets to direct HTTP); HTTP floor = median of 1 + direct stdio p50 / direct HTTP p50\n"+
		"= %.2fx. A goal in parentheses is not in the issues' lists but measured the same way; * marks a goal mcpmux does not meet.\n"+
		"\"own\" is the proxy's own process (mcpmux, TBXark/mcp-proxy); mcpmux's helper is its supervisor.\n", proto, proto, floor)
	var cols []*target
	for _, t := range m.ts {
		if t.proto == proto && t.base != "" {
			cols = append(cols, t)
		}
	}
	// Stdio and HTTP targets with the same children share a column.
	var names []string
	seen := map[string]bool{}
	for _, t := range cols {
		if n := colName(t); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "figure\tgoal\t%s\t\n", strings.Join(names, "\t"))
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t", c.what, c.goal)
		for _, n := range names {
			cell := "-"
			for _, t := range cols {
				if colName(t) == n && c.applies(t) {
					cell = c.cell(m, t)
				}
			}
			fmt.Fprintf(tw, "%s\t", cell)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// colName is the column of t in the ratio table: mcpmux's children, or the
// target's own name.
func colName(t *target) string {
	if t.kind != kindMux {
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

func atMost(g float64) func(float64) bool  { return func(v float64) bool { return v <= g } }
func atLeast(g float64) func(float64) bool { return func(v float64) bool { return v >= g } }
