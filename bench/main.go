// Command bench is mcpmux's benchmark: it runs a fast echo child (bench/
// echochild) directly over stdio and over streamable HTTP, behind mcpmux
// over its stdio and HTTP upstreams with 1, 10 and 50 children, and behind
// TBXark/mcp-proxy over HTTP (-tbxark PATH), each with a 2025-11-25 client
// and a 2026-07-28 client, interleaved in one run of R repetitions. It
// prints medians and the medians of per-repetition ratios next to the
// targets of issues 8 and 15, per protocol version, then issue 15's
// targets judged at 2025-11-25 with 2026-07-28 beside. -scale prints the
// scale and restart figures instead; -smoke runs everything briefly.
//
//	go run ./bench                 the main table (about 4 minutes)
//	go run ./bench -scale          the scale and restart figures
//	go run ./bench -smoke          both, briefly: fails only if they cannot run
//
// See bench/README.md for what each figure means and how memory is read.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

type options struct {
	reps       int
	w          workload
	tools      int // synthetic tools of the main child (3 more are echo, sleep_ms, big)
	page       int
	children   []int
	mcpmux     string
	echochild  string
	linecopy   string
	extraStdio []string
	extraHTTP  []string
	extraName  string // prefix of echo and big on extra targets
	// protocols are the protocol versions every target is measured at,
	// the one issue 15 judges first.
	protocols []string
	// tbxark is the TBXark/mcp-proxy binary ("": not measured).
	tbxark string
	scale  bool
	main   bool
	smoke  bool
	// pinning is [mux] pinning in every mcpmux config ("": the config's
	// default).
	pinning string
}

func main() {
	var o options
	var children, protocols string
	flag.IntVar(&o.reps, "r", 5, "repetitions, interleaved")
	flag.IntVar(&o.w.serial, "k", 1000, "serial echo calls per repetition")
	flag.IntVar(&o.w.conc, "c", 8, "concurrent callers")
	flag.IntVar(&o.w.concCalls, "cn", 2000, "calls made by the concurrent callers together")
	flag.IntVar(&o.w.lists, "lists", 3, "tools/list (all pages) per repetition; the median counts")
	flag.IntVar(&o.w.bigCalls, "bign", 16, "large-result calls per repetition")
	flag.IntVar(&o.w.bigBytes, "bigbytes", 256<<10, "size of each large result")
	flag.IntVar(&o.tools, "tools", 2002, "synthetic tools of the measured child (it has 3 more)")
	flag.IntVar(&o.page, "page", 0, "tools/list page size of the children (0: one page)")
	flag.StringVar(&children, "children", "1,10,50", "children behind mcpmux, one mcpmux target per count")
	flag.StringVar(&o.mcpmux, "mcpmux", "", "mcpmux binary (default: built from ./cmd/mcpmux)")
	flag.StringVar(&o.echochild, "echochild", "", "echochild binary (default: built from ./bench/echochild)")
	flag.StringVar(&o.linecopy, "linecopy", "", "linecopy binary, the floor of a stdio proxy (default: built from ./bench/linecopy)")
	flag.Func("extra-stdio", "NAME=COMMAND: one more stdio target, compared with direct stdio ({echochild} and {tools} are replaced; repeatable)", func(s string) error {
		o.extraStdio = append(o.extraStdio, s)
		return nil
	})
	flag.Func("extra-http", "NAME=URL: one more streamable HTTP target, already running, compared with direct HTTP (repeatable)", func(s string) error {
		o.extraHTTP = append(o.extraHTTP, s)
		return nil
	})
	flag.StringVar(&o.extraName, "extra-prefix", "", "prefix of the echo and big tools on extra targets")
	flag.BoolVar(&o.scale, "scale", false, "print the scale and restart figures instead of the main table")
	flag.BoolVar(&o.main, "main", false, "with -scale, print the main table as well")
	flag.StringVar(&o.pinning, "pinning", "", "[mux] pinning of mcpmux: off, warn or enforce (default: the config's default)")
	flag.BoolVar(&o.smoke, "smoke", false, "run the main table and the scale figures briefly (for CI)")
	flag.StringVar(&protocols, "protocols", mcp.ProtocolVersion20251125+","+mcp.ProtocolVersion20260728,
		"protocol versions the clients ask for, each target measured at each; the first is the one issue 15's targets are judged at")
	flag.StringVar(&o.tbxark, "tbxark", "", "TBXark/mcp-proxy binary, measured over HTTP beside mcpmux (default: not measured)")
	flag.Parse()
	seen := map[string]bool{}
	for _, p := range strings.Split(protocols, ",") {
		p = strings.TrimSpace(p)
		if !mcp.IsValidProtocolVersion(p) {
			fatalf("-protocols: %q is no protocol version mcp-go knows (%s)", p, strings.Join(mcp.ValidProtocolVersions, ", "))
		}
		if !seen[p] {
			seen[p] = true
			o.protocols = append(o.protocols, p)
		}
	}
	for _, f := range strings.Split(children, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatalf("-children: %q is not a positive number", f)
		}
		o.children = append(o.children, n)
	}
	if o.smoke {
		o.reps, o.w = 1, workload{lists: 1, serial: 50, conc: 4, concCalls: 100, bigCalls: 2, bigBytes: 256 << 10}
		o.tools, o.children, o.scale, o.main = 200, []int{1, 3}, true, true
	}
	if o.reps < 1 || o.w.serial < 1 || o.w.conc < 1 || o.w.concCalls < o.w.conc || o.w.lists < 1 || o.w.bigCalls < 1 {
		fatalf("-r, -k, -c, -lists and -bign must be at least 1, and -cn at least -c")
	}

	dir, err := os.MkdirTemp("", "mcpbench-")
	if err != nil {
		fatalf("%v", err)
	}
	code := run(o, dir)
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "mcpbench: logs kept in %s\n", dir)
	}
	os.Exit(code)
}

func run(o options, dir string) int {
	if err := build(&o, dir); err != nil {
		fmt.Fprintf(os.Stderr, "mcpbench: %v\n", err)
		return 1
	}
	fmt.Printf("mcpbench %s, %s, %d CPUs, %s/%s\n", time.Now().Format("2006-01-02 15:04"), runtime.Version(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	ctx := context.Background()
	var (
		m   *mainResults
		sc  *scaleResults
		err error
	)
	if !o.scale || o.main {
		if m, err = mainTable(ctx, o, dir); err != nil {
			fmt.Fprintf(os.Stderr, "mcpbench: %v\n", err)
			return 1
		}
	}
	if o.scale {
		if sc, err = scaleFigures(ctx, o, dir); err != nil {
			fmt.Fprintf(os.Stderr, "mcpbench: %v\n", err)
			return 1
		}
	}
	printIssue15(o, m, sc)
	return 0
}

// build builds whichever of mcpmux, echochild and linecopy was not given.
func build(o *options, dir string) error {
	var pkgs []string
	if o.mcpmux == "" {
		o.mcpmux, pkgs = filepath.Join(dir, "bin", "mcpmux"), append(pkgs, "./cmd/mcpmux")
	}
	if o.echochild == "" {
		o.echochild, pkgs = filepath.Join(dir, "bin", childComm), append(pkgs, "./bench/echochild")
	}
	if o.linecopy == "" {
		o.linecopy, pkgs = filepath.Join(dir, "bin", "linecopy"), append(pkgs, "./bench/linecopy")
	}
	if len(pkgs) == 0 {
		return nil
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return fmt.Errorf("finding the module root (run from inside the mcpmux module): %w", err)
	}
	cmd := exec.Command("go", append([]string{"build", "-o", filepath.Join(dir, "bin") + "/"}, pkgs...)...)
	cmd.Dir = strings.TrimSpace(string(root))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	// Written back, as an installed binary is: a page of a file still dirty
	// in the page cache counts as written in smaps, so mcpmux would keep
	// its binary's pages resident where it drops them when installed.
	for _, p := range []string{o.mcpmux, o.echochild} {
		if f, err := os.Open(p); err == nil {
			_ = f.Sync()
			f.Close()
		}
	}
	return nil
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "mcpbench: "+format+"\n", args...)
	os.Exit(2)
}
