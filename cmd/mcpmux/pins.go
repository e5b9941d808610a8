package main

// mcpmux pins diff and mcpmux pins approve: like mcpmux tools, they start
// the children, read their live catalogs and compare them with the pin
// file.

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/pins"
)

// pinsCmd runs mcpmux pins. diff exits 0 when every live definition is its
// pin and 1 when one is not (as diff(1) does, so that CI can gate on it);
// approve exits 0 once the file is written, 1 when it cannot be.
func pinsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		writeAllUsage(stdout, "pins ")
		return exitOK
	}
	if len(args) == 0 || (args[0] != "diff" && args[0] != "approve") {
		if len(args) > 0 {
			fmt.Fprintf(stderr, "mcpmux pins: unknown command %q\n", args[0])
		}
		writeAllUsage(stderr, "pins ")
		return exitRefused
	}
	sub := args[0]
	c := lookup("pins " + sub)
	fs := c.newFlagSet()
	cfgPath := defineConfig(fs)
	if code, done := c.parse(fs, args[1:], stdout, stderr); done {
		return code
	}
	l, code := load(*cfgPath, stderr, true)
	if l == nil {
		return code
	}
	store, err := pins.Open(l.cfg.Mux.PinFile, l.log, pins.Options{NoWrite: true})
	if err != nil {
		report(stderr, err)
		return exitBadConfig
	}
	// Every definition is compared, whatever pinning serve runs with; no
	// first-sight pin is written, and nothing is held.
	cfg := *l.cfg
	cfg.Mux.Pinning, cfg.Mux.PinNew = config.PinningWarn, config.PinNewPin
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := muxOptions(l.log)
	opts.Pins = store
	m := mux.New(&cfg, l.policies, opts)
	m.Start(ctx)
	defer m.Close()
	_ = m.WaitReady(ctx)
	consequence := "its tools and prompts are not compared"
	if sub == "approve" {
		consequence = "its pins are left as they are"
	}
	down := notReady("pins "+sub, m, stderr, consequence)
	report := m.PinReport()
	if names := fs.Args(); len(names) > 0 {
		for _, n := range names {
			if !slices.ContainsFunc(report, func(st mux.PinState) bool { return st.Name == n }) {
				fmt.Fprintf(stderr, "mcpmux pins %s: %s: no tool or prompt of that name differs from its pin\n", sub, n)
				return exitRefused
			}
		}
		// Every match: a tool and a prompt may share a name.
		report = slices.DeleteFunc(report, func(st mux.PinState) bool { return !slices.Contains(names, st.Name) })
	}
	if sub == "diff" {
		for _, st := range report {
			writeState(stdout, st)
		}
		switch {
		case len(report) > 0:
			return exitToolError
		case down:
			// Not compared is not the same.
			fmt.Fprintf(stdout, "every live tool and prompt of the servers that came up matches its pin in %s\n", shown(store.Path()))
			return exitToolError
		}
		fmt.Fprintf(stdout, "every live tool and prompt matches its pin in %s\n", shown(store.Path()))
		return exitOK
	}
	var approve, drop []pins.Pin
	for _, st := range report {
		if st.Live == nil {
			drop = append(drop, *st.Pinned)
		} else {
			approve = append(approve, pins.NewPin(*st.Live))
		}
	}
	if err := store.Approve(approve, drop); err != nil {
		fmt.Fprintf(stderr, "mcpmux pins approve: %v\n", err)
		return exitToolError
	}
	for _, st := range report {
		if st.Live == nil {
			fmt.Fprintf(stdout, "approved: %s: its pin is removed\n", describe(st))
			continue
		}
		fmt.Fprintf(stdout, "approved: %s: pinned as %s\n", describe(st), st.Live.Digest())
	}
	fmt.Fprintf(stdout, "%s: %d approved, %d pins in all\n", shown(store.Path()), len(report), store.Current().Len())
	return exitOK
}

// describe is one line about st: what it is and how it differs.
func describe(st mux.PinState) string {
	what := fmt.Sprintf("%s %s (server %s)", st.Kind, st.Name, st.Server)
	switch {
	case st.Live == nil:
		return "gone " + what + ": pinned, no longer listed"
	case st.Pinned == nil:
		return "new " + what + ": never pinned"
	}
	switch len(st.Changed) {
	case 0: // the pin's fields could not be read, only its digest
		return fmt.Sprintf("changed %s: its definition differs from the pin", what)
	case 1:
		return fmt.Sprintf("changed %s: %s differs from the pin", what, st.Changed[0])
	}
	return fmt.Sprintf("changed %s: %s differ from the pin", what, strings.Join(st.Changed, ", "))
}

// writeState is st for pins diff: what it is, the digests, and the diff.
// approve prints the digest it writes: a reviewer compares it with the
// live one diff showed, since approve reads the children afresh.
func writeState(w io.Writer, st mux.PinState) {
	fmt.Fprintln(w, describe(st))
	if st.Pinned != nil {
		fmt.Fprintf(w, "  pinned: %s\n", st.Pinned.Digest)
	}
	if st.Live != nil {
		fmt.Fprintf(w, "  live:   %s\n", st.Live.Digest())
	}
	pins.WriteDiff(w, st.Pinned, st.Live)
}
