package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The server list's share of the chaos: spare children that the config
// edits add, remove, replace and re-expose, and that the kill loop leaves
// alone, so that what happens to their calls is the edits' doing.
const (
	serverEditEvery = 2 * time.Second
	// refusalSlack is how long after a spare is back in the saved config a
	// call to it may still be refused: the reload, then its child's start.
	refusalSlack = 2 * startupTimeout
)

// spareAliases are the spares; the last one is replaced stop-first.
var spareAliases = []string{"spare0", "spare1", "spare2"}

// serverList is the server list of the config file, which its editor
// goroutine alone changes; what it logged is read after the load.
type serverList struct {
	lab      *ts.Lab
	muxLines string
	base     []ts.Server // the kill pool's children, never edited
	records  string
	present  map[string]bool
	gen      map[string]int  // of each spare's environment: a change replaces it
	limited  map[string]bool // max_in_flight set: a change re-exposes it
	edits    map[string]int  // by kind
	log      []serverEdit
}

type serverEdit struct {
	at      time.Time
	alias   string
	present bool // the alias is in the list the edit saved
}

func newServerList(lab *ts.Lab, muxLines string, base []ts.Server, records string) *serverList {
	l := &serverList{lab: lab, muxLines: muxLines, base: base, records: records,
		present: map[string]bool{}, gen: map[string]int{}, limited: map[string]bool{}, edits: map[string]int{}}
	// One spare is missing from the start, so that the first edits add too.
	for _, a := range spareAliases[:len(spareAliases)-1] {
		l.present[a] = true
	}
	return l
}

// servers is the list to save: the kill pool's, then the spares present.
func (l *serverList) servers() []ts.Server {
	out := slices.Clone(l.base)
	for i, a := range spareAliases {
		if !l.present[a] {
			continue
		}
		extra := fmt.Sprintf("startup_timeout = %q", startupTimeout)
		if l.limited[a] {
			extra += "\nmax_in_flight = 3"
		}
		if i == len(spareAliases)-1 {
			extra += "\nreplace = \"stop-first\""
		}
		out = append(out, ts.Server{Alias: a, Extra: extra,
			Env: map[string]string{"LAB_RECORDS_DIR": l.records, "SOAK_GEN": strconv.Itoa(l.gen[a])}})
	}
	return out
}

// edit changes one spare, picked by rng: an absent one is added; a present
// one is removed, replaced or re-exposed.
func (l *serverList) edit(rng *rand.Rand) error {
	a := spareAliases[rng.IntN(len(spareAliases))]
	kind := "add"
	switch {
	case !l.present[a]:
		l.present[a] = true
	default:
		switch rng.IntN(3) {
		case 0:
			kind = "remove"
			l.present[a] = false
		case 1:
			kind = "replace"
			l.gen[a]++
		default:
			kind = "re-expose"
			l.limited[a] = !l.limited[a]
		}
	}
	if err := l.lab.Save(l.muxLines, l.servers()...); err != nil {
		return fmt.Errorf("server list edit (%s %s): %w", kind, a, err)
	}
	l.edits[kind]++
	l.log = append(l.log, serverEdit{at: time.Now(), alias: a, present: l.present[a]})
	return nil
}

// mayRefuse reports whether a call to alias, made at start and answered at
// end, may be refused as unknown: alias is a spare that was out of the
// saved list at some moment of [start-refusalSlack, end].
func (l *serverList) mayRefuse(alias string, start, end time.Time) bool {
	if !slices.Contains(spareAliases, alias) {
		return false
	}
	from := start.Add(-refusalSlack)
	in := alias != spareAliases[len(spareAliases)-1] // before the first edit
	for _, e := range l.log {
		switch {
		case e.alias != alias:
		case e.at.After(end):
			return !in
		case e.at.After(from):
			if !e.present {
				return true
			}
		default:
			in = e.present
		}
	}
	return !in
}

// loop edits the server list every serverEditEvery.
func (l *serverList) loop(ctx context.Context, rng *rand.Rand) error {
	tick := time.NewTicker(serverEditEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := l.edit(rng); err != nil {
			return err
		}
	}
}

// spareTools is the sorted list of the spares whose tools a list shows.
func spareTools(names []string) []string {
	var out []string
	for _, n := range names {
		a, _, _ := strings.Cut(n, "__")
		if slices.Contains(spareAliases, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// want is the sorted list of the spares present.
func (l *serverList) want() []string {
	var out []string
	for _, a := range spareAliases {
		if l.present[a] {
			out = append(out, a)
		}
	}
	return out
}

func (l *serverList) summary() string {
	return fmt.Sprintf("server list edits %d (add %d, remove %d, replace %d, re-expose %d)",
		sumValues(l.edits), l.edits["add"], l.edits["remove"], l.edits["replace"], l.edits["re-expose"])
}

// converged checks, once the load is over, that every mcpmux came to the
// last saved server list: reader sees the tools of exactly the spares in it,
// and exactly one labserver runs per server in it (none of a removed or
// replaced child's is left).
func (s *soak) converged() {
	want := s.list.want()
	for _, tg := range s.targets {
		var seen []string
		if !ts.Settles(func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
			defer cancel()
			res, err := tg.lister.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				return false
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			seen = spareTools(names)
			return slices.Equal(seen, want)
		}) {
			s.t.Errorf("%s: the spares listed are %v; the saved server list has %v", tg.name, seen, want)
		}
		var alive []int
		if !ts.Settles(func() bool {
			alive = alive[:0]
			for _, pid := range tg.log.ChildPids() {
				if s.isLabserver(pid) {
					alive = append(alive, pid)
				}
			}
			return len(alive) == len(s.aliases)+len(want)
		}) {
			s.t.Errorf("%s: %d labservers run (%v) for the %d servers of the saved list", tg.name, len(alive), alive, len(s.aliases)+len(want))
		}
	}
}
