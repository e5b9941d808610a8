package main

// mcpmux pins diff and mcpmux pins approve: they compare what the running
// serve processes record they hold (pins.ReadHeld) with the pin file, or,
// when none holds anything (or with --live), start the children like
// mcpmux tools does, read their live catalogs and compare those.

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/mcpmux/mcpmux/mux"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/pins"
)

// pinsCmd runs mcpmux pins. diff exits 0 when every definition is its pin
// and 1 when one is not (as diff(1) does, so that CI can gate on it);
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
	flags := definePins(fs)
	cfgPath, live := flags.config, flags.live
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
	if !*live {
		held, err := pins.ReadHeld(store.Path())
		if err != nil {
			fmt.Fprintf(stderr, "mcpmux pins %s: %v\n", sub, err)
		}
		if held = unapproved(held, store.Current()); len(held) > 0 {
			return pinsHeld(sub, store, held, fs.Args(), stdout, stderr)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := muxOptions(l.log)
	// Every definition is compared, whatever pinning serve runs with; no
	// first-sight pin is written, nothing is held, and what differs is
	// printed rather than logged.
	opts.Pins, opts.ComparePins = store, true
	m := mux.New(l.cfg, l.policies, opts)
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
			if !slices.ContainsFunc(report, func(st publish.PinState) bool { return st.Name == n }) {
				fmt.Fprintf(stderr, "mcpmux pins %s: %s: no tool or prompt of that name differs from its pin\n", sub, n)
				return exitRefused
			}
		}
		// Every match: a tool and a prompt may share a name.
		report = slices.DeleteFunc(report, func(st publish.PinState) bool { return !slices.Contains(names, st.Name) })
	}
	// Pins of the first form that their definitions match: not differences,
	// but approving everything pins them whole.
	upgrades := m.PinUpgrades()
	if len(fs.Args()) > 0 {
		upgrades = nil
	}
	if sub == "diff" {
		for _, st := range report {
			writeState(stdout, st)
		}
		for _, p := range upgrades {
			fmt.Fprintf(stdout, "note: %s %s (server %s) matches its pin, which is of the first form: mcpmux serve or pins approve pins it as %s, its whole definition\n",
				p.Kind, p.Name, p.Server(), p.Digest)
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
	approve, drop := upgrades, []pins.Pin(nil)
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
	for _, p := range upgrades {
		fmt.Fprintf(stdout, "pinned whole: %s %s (server %s), whose pin was of the first form: pinned as %s\n", p.Kind, p.Name, p.Server(), p.Digest)
	}
	fmt.Fprintf(stdout, "%s: %d approved, %d pins in all\n", shown(store.Path()), len(report), store.Current().Len())
	return exitOK
}

// unapproved is held without the definitions that are their pins already
// (approved since, and the serve processes holding them not reloaded yet).
func unapproved(held []pins.Held, set *pins.Index) []pins.Held {
	return slices.DeleteFunc(held, func(h pins.Held) bool {
		ref, ok := set.Get(h.Kind, h.Name)
		return ok && ref.Sum.String() == h.Digest
	})
}

// pinsHeld is pins diff and approve of what running serve processes hold,
// compared with the pins in store's file; names, if any, are the tools and
// prompts to act on.
func pinsHeld(sub string, store *pins.Store, held []pins.Held, names []string, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "mcpmux pins %s: comparing what running mcpmux serve processes hold (%s), without starting the servers; --live starts them instead\n",
		sub, pins.HeldDir(store.Path()))
	for _, n := range names {
		if !slices.ContainsFunc(held, func(h pins.Held) bool { return h.Name == n }) {
			fmt.Fprintf(stderr, "mcpmux pins %s: %s: no running mcpmux serve holds a tool or prompt of that name; --live starts the servers and compares their definitions\n", sub, n)
			return exitRefused
		}
	}
	if len(names) > 0 {
		held = slices.DeleteFunc(held, func(h pins.Held) bool { return !slices.Contains(names, h.Name) })
	}
	set, err := store.Read()
	if err != nil {
		fmt.Fprintf(stderr, "mcpmux pins %s: %v\n", sub, err)
		return exitBadConfig
	}
	states := make([]publish.PinState, len(held))
	for i, h := range held {
		st := publish.PinState{Kind: h.Kind, Name: h.Name, Server: h.Server(), Live: &held[i].Def, Held: true}
		if pin, ok := set.Get(h.Kind, h.Name); ok {
			st.Pinned, st.Changed = &pin, pins.Changed(pin.Def, h.Def)
		}
		states[i] = st
	}
	if sub == "diff" {
		for i, st := range states {
			writeState(stdout, st, "held by "+holders(held[i].Holders))
		}
		return exitToolError
	}
	// One pin per name: serve processes holding different definitions of
	// one name leave the choice to the operator.
	for i, h := range held {
		for _, o := range held[i+1:] {
			if o.Kind == h.Kind && o.Name == h.Name {
				fmt.Fprintf(stderr, "mcpmux pins approve: %s %s: running serve processes hold different definitions of it (%s, held by %s; %s, held by %s): nothing is approved; restart those holding the one not to approve, or approve with --live\n",
					h.Kind, h.Name, h.Digest, holders(h.Holders), o.Digest, holders(o.Holders))
				return exitRefused
			}
		}
	}
	approve := make([]pins.Pin, len(held))
	for i, h := range held {
		approve[i] = pins.NewPin(h.Def)
	}
	if err := store.Approve(approve, nil); err != nil {
		fmt.Fprintf(stderr, "mcpmux pins approve: %v\n", err)
		return exitToolError
	}
	for _, st := range states {
		fmt.Fprintf(stdout, "approved: %s: pinned as %s\n", describe(st), st.Live.Digest())
	}
	fmt.Fprintf(stdout, "%s: %d approved, %d pins in all\n", shown(store.Path()), len(states), store.Current().Len())
	return exitOK
}

// holders says which serve processes hold a definition.
func holders(hs []pins.Holder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s pid %d", h.Host, h.PID)
	}
	noun := "process"
	if len(hs) != 1 {
		noun = "processes"
	}
	return fmt.Sprintf("%d mcpmux serve %s: %s", len(hs), noun, strings.Join(parts, ", "))
}

// describe is one line about st: what it is and how it differs.
func describe(st publish.PinState) string {
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

// writeState is st for pins diff: what it is, the digests, notes (one
// line each), and the diff. approve prints the digest it writes: a
// reviewer compares it with the live one diff showed, since approve --live
// reads the children afresh.
func writeState(w io.Writer, st publish.PinState, notes ...string) {
	fmt.Fprintln(w, describe(st))
	if st.Pinned != nil {
		fmt.Fprintf(w, "  pinned: %s\n", st.Pinned.Digest)
	}
	if st.Live != nil {
		fmt.Fprintf(w, "  live:   %s\n", st.Live.Digest())
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	pins.WriteDiff(w, st.Pinned, st.Live)
}
