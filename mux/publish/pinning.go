package publish

// Tool and prompt pinning: each tool's and prompt's digest is computed
// where its child's catalog is built (in parallel across children, once
// per distinct tool definition), and where the merged catalog is built it
// is compared with its pin (package pins). A definition that differs from
// its pin, under pinning = "enforce", and one never pinned, under pin_new
// = "hold" or under enforce once pins exist (config's HoldNew), is held:
// left out of the snapshot's lists and registry, so that it is not listed
// and a request for it is refused like one for an unknown name. Nothing
// here runs on the call path but the audit of a refusal, which reads the
// published view through an atomic pointer.

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/pins"
)

// StillPinned reports whether a request for e, looked up in the catalog
// published last, may go to the session whose catalog is listed: under
// enforce, only if that catalog lists e's definition as e was looked up
// with. A session a restart or a re-read brought, whose definition may be
// held once the catalog is rebuilt, is visible to requests before then.
func (p *Pinning) StillPinned(listed *catalog.ChildCatalog, e *catalog.Entry) bool {
	if p == nil || !p.enforce {
		return true
	}
	if listed == nil {
		return false
	}
	sum, ok := listed.Digests[catalog.OwnName{Kind: e.Kind, Orig: e.Orig}]
	return ok && sum == e.Pin
}

// Pinning is the mux's side of Pinning. Its fields but view, changes and
// io are used only under the publisher's mu.
type Pinning struct {
	store   *pins.Store
	enforce bool // a changed definition is held, not only logged
	mode    string
	// holdNew is config's HoldNew: whether a definition never pinned is
	// held rather than pinned on sight, given whether pins exist yet.
	holdNew func(pinsExist bool) bool
	// pinned is set once a build has pinned anything on first sight, so
	// that the builds that follow it, which may run before those pins are
	// in the store, do not trust on first use again.
	pinned bool
	// compare: only compared and reported, for the pins commands: nothing
	// is held, pinned on first sight or logged (Options.ComparePins).
	compare bool

	logged map[pinKey]pins.Sum // the digest last logged as differing from its pin
	// recorded is the held set last handed to the held record.
	recorded map[pinKey]pins.Sum
	view     atomic.Pointer[pinView]
	changes  atomic.Uint64 // definitions seen differing from their pins (or held new), each logged once
	// io serialises the pin file work of catalog builds (pinWork.do),
	// taken before the publisher's mu is let go, so that builds write in the order
	// they were built while the next build need not wait for a write.
	io sync.Mutex

	log zerolog.Logger
}

// pinWork is the pin file work a catalog build leaves for after it is
// published: pinning fresh on first sight, and logging changed with
// the fields that changed, which are read from the file.
type pinWork struct {
	fresh   []*catalog.Entry
	changed []pinNote
	upgrade []pinUpgrade
	// tofu: fresh are pinned on trust on first use, there being no pins
	// yet, where later first sights are held (config's HoldNew).
	tofu bool
	// record: the held set changed, and held is it now, for the store's
	// held record (pins.Store.RecordHeld).
	record bool
	held   []pinNote
}

type pinKey struct {
	kind pins.Kind
	name string
}

// pinView is what the last catalog build found, published for status and
// for the audit of refusals.
type pinView struct {
	held   map[pinKey]string // -> alias
	counts PinCounts
	report []pinNote        // changed, and new ones held, in catalog order; then gone ones
	fresh  []*catalog.Entry // new ones pinned on sight: all of a catalog's at a first start
	// upgrade are the ones whose partial pins (pins.Pin.Partial) they
	// match, to pin whole.
	upgrade []pinUpgrade
}

// pinUpgrade is a tool or prompt that matches its partial pin: wider is
// set when its whole definition has more than the pin covers (_meta,
// icons, any other member), which pinning it whole trusts as it is.
type pinUpgrade struct {
	e     *catalog.Entry
	wider bool
}

// pinNote is one tool or prompt whose live definition is not its pin, as
// a build found it: its fields are read when PinReport is asked for.
type pinNote struct {
	kind   pins.Kind
	name   string
	server string
	live   *catalog.Entry // nil: the pin's tool or prompt is gone
	pinned bool
	pin    pins.Sum
	held   bool
}

// PinCounts is what /readyz and the metrics tell of pinning.
type PinCounts struct {
	Mode     string // config's pinning
	Pinned   int    // live definitions equal to their pins
	New      int    // live definitions never pinned before this build (pinned on sight, or held)
	Changed  int    // live definitions that differ from their pins (held or not)
	Held     int    // left out of the catalog
	Gone     int    // pins of a ready server's tools or prompts it no longer lists
	InMemory int    // pins the pin file could not take, kept in memory
	// Changes counts definitions seen differing from their pins, or held
	// as new, since start: each distinct definition once.
	Changes uint64
	FileErr error // what is wrong with the pin file on disk, if anything
}

// PinState is one tool or prompt whose live definition is not its pin.
type PinState struct {
	Kind   pins.Kind
	Name   string // exposed
	Server string
	// Live is the definition listed now; nil when the pin's tool is gone.
	Live *pins.Def
	// Pinned is the pin; nil for a definition never pinned. Its Fields
	// are nil when they could not be read from the pin file.
	Pinned *pins.Pin
	// Changed names the fields that differ; nil for a new or gone one,
	// and when the pin's fields could not be read.
	Changed []string
	Held    bool
}

// NewPinning returns the pinning of cfg over store, nil when pinning is
// off and not only compared.
func NewPinning(cfg *config.Config, store *pins.Store, compare bool, log zerolog.Logger) *Pinning {
	if store == nil || cfg.Mux.Pinning == config.PinningOff && !compare {
		return nil
	}
	p := &Pinning{
		store:   store,
		mode:    cfg.Mux.Pinning,
		enforce: cfg.Mux.Pinning == config.PinningEnforce && !compare,
		holdNew: cfg.Mux.HoldNew,
		compare: compare,
		logged:  map[pinKey]pins.Sum{},
		log:     log,
	}
	if compare {
		p.holdNew = func(bool) bool { return false }
	}
	p.view.Store(&pinView{})
	return p
}

// applyPins compares the digests of next's tools and prompts with their
// pins, leaves the held ones out of next, and publishes what it found. It
// returns the work left for the pin file: the entries to pin on first
// sight, and the definitions newly seen differing from their pins, to log
// once each. A pin counts gone only if its server, ready[alias], lists.
// Called under the publisher's mu, before next is published.
func (p *Pinning) applyPins(next *catalog.Catalog, ready map[string]bool) pinWork {
	if p == nil {
		return pinWork{}
	}
	set := p.store.Current()
	exist := p.pinned || set.Len() > 0 || p.store.Exists()
	hold := p.holdNew(exist)
	logged := map[pinKey]pins.Sum{}
	view := &pinView{held: map[pinKey]string{}}
	// Gone first, while next's names still hold the entries held below.
	var gone []pinNote
	set.Each(func(pk pins.Kind, name string, ref pins.Ref) {
		if _, live := next.Kinds[catalog.KindOfPin(pk)].ByName[name]; !live && ready[ref.Server] {
			gone = append(gone, pinNote{kind: pk, name: name, server: ref.Server, pinned: true, pin: ref.Sum})
		}
	})
	slices.SortFunc(gone, func(a, b pinNote) int { return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name)) })
	view.counts.Gone = len(gone)
	var fresh []*catalog.Entry
	var upgrade []pinUpgrade
	for _, pk := range catalog.PinKinds {
		sec := &next.Kinds[pk.K]
		kept := sec.List[:0]
		for _, e := range sec.List {
			key := pinKey{pk.Pin, e.Name}
			ref, pinned := set.Get(pk.Pin, e.Name)
			if pinned && ref.Partial && (ref.Sum == e.Pin || p.partialSum(pk.Pin, e) == ref.Sum) {
				upgrade = append(upgrade, pinUpgrade{e, ref.Sum != e.Pin})
				view.counts.Pinned++
				kept = append(kept, e)
				continue
			}
			if pinned && ref.Sum == e.Pin {
				view.counts.Pinned++
				kept = append(kept, e)
				continue
			}
			note := pinNote{kind: pk.Pin, name: e.Name, server: e.Server, live: e, pinned: pinned, pin: ref.Sum}
			if pinned {
				note.held = p.enforce
				view.counts.Changed++
			} else {
				note.held = hold
				view.counts.New++
			}
			if !note.held && !pinned {
				fresh = append(fresh, e)
				kept = append(kept, e)
				continue
			}
			view.report = append(view.report, note)
			logged[key] = e.Pin
			if p.logged[key] != e.Pin {
				p.changes.Add(1)
				if !pinned && !p.compare { // a changed one is logged by logChanged
					p.logPinned(PinState{Kind: pk.Pin, Name: e.Name, Server: e.Server, Held: note.held}, p.mode)
				}
			}
			if !note.held {
				kept = append(kept, e)
				continue
			}
			view.counts.Held++
			view.held[key] = e.Server
			delete(sec.ByName, e.Name)
		}
		clear(sec.List[len(kept):]) // no held entry stays reachable
		sec.List = kept
	}
	var changed []pinNote
	for _, n := range view.report {
		if n.live != nil && n.pinned && p.logged[pinKey{n.kind, n.name}] != n.live.Pin {
			changed = append(changed, n)
		}
	}
	view.report = append(view.report, gone...)
	p.logged = logged
	view.counts.Mode = p.mode
	view.fresh, view.upgrade = fresh, upgrade
	p.view.Store(view)
	if p.compare {
		return pinWork{} // reported by PinReport, not logged or written
	}
	p.pinned = p.pinned || len(fresh) > 0
	w := pinWork{fresh: fresh, changed: changed, upgrade: upgrade, tofu: !exist && p.holdNew(true)}
	held := map[pinKey]pins.Sum{}
	for _, n := range view.report {
		if n.held && n.live != nil {
			held[pinKey{n.kind, n.name}] = n.live.Pin
			w.held = append(w.held, n)
		}
	}
	if !maps.Equal(held, p.recorded) {
		p.recorded, w.record = held, true
	}
	return w
}

// do does w: called under pinning.io, after the catalog w is of is
// published.
func (w pinWork) do(p *Pinning) {
	if w.record {
		p.recordHeld(w.held)
	}
	p.logChanged(w.changed)
	p.pinFresh(w.fresh, w.tofu)
	p.pinWhole(w.upgrade)
}

// recordHeld writes the held record of this process: the definitions of
// held, which mcpmux pins diff and approve read instead of starting
// children of their own.
func (p *Pinning) recordHeld(held []pinNote) {
	ps := make([]pins.Pin, 0, len(held))
	for _, n := range held {
		def, err := pins.Canonical(n.kind, n.name, n.server, n.live.Orig, n.live.Def)
		if err != nil {
			continue // matches no pin, and cannot be approved
		}
		ps = append(ps, pins.NewPin(def))
	}
	p.store.RecordHeld(ps)
}

// partialSum is the digest in the first canonical form of e's definition,
// compared with a partial pin; the zero Sum, which no pin has, when it has
// no canonical form.
func (p *Pinning) partialSum(pk pins.Kind, e *catalog.Entry) pins.Sum {
	sum, _ := pins.PartialDigest(pk, e.Server, e.Orig, e.Def) // an error is logged by pinSum
	return sum
}

// pinWhole pins whole the tools and prompts that match their partial pins,
// and logs that it did, naming those whose definitions have members the
// partial pins did not cover.
func (p *Pinning) pinWhole(up []pinUpgrade) {
	if len(up) == 0 {
		return
	}
	ps := make([]pins.Pin, 0, len(up))
	var wider []string
	for _, u := range up {
		pk, _ := catalog.PinKindOf(u.e.Kind)
		def, err := pins.Canonical(pk, u.e.Name, u.e.Server, u.e.Orig, u.e.Def)
		if err != nil {
			continue
		}
		ps = append(ps, pins.NewPin(def))
		if u.wider {
			wider = append(wider, u.e.Name)
		}
	}
	p.store.Pin(ps)
	ev := p.log.Info()
	msg := "pins of the first form (a pin file of format 1, or entries marked v1) matched by the fields they cover: pinned now with their whole definitions"
	if p.store.ReadOnly() {
		msg += ", for this run only (the pin file is not written)"
	}
	if len(wider) > 0 {
		ev = p.log.Warn().Strs("wider", wider)
		msg += "; the members of those named in wider that the old pins did not cover (_meta, icons, others) are trusted as they are now: review them with git diff of the pin file"
	}
	ev.Int("pinned", len(ps)).Str("pin_file", p.store.Path()).Msg(msg)
}

// Upgrades is PinUpgrades.
func (p *Pinning) Upgrades() []pins.Pin {
	if p == nil {
		return nil
	}
	var out []pins.Pin
	for _, u := range p.view.Load().upgrade {
		pk, _ := catalog.PinKindOf(u.e.Kind)
		if def, err := pins.Canonical(pk, u.e.Name, u.e.Server, u.e.Orig, u.e.Def); err == nil {
			out = append(out, pins.NewPin(def))
		}
	}
	return out
}

// logChanged writes the log line of each definition in notes, naming the
// changed fields, which it reads from the pin file (a rare event: the file
// is read once for all of them).
func (p *Pinning) logChanged(notes []pinNote) {
	var set *pins.Set
	for _, n := range notes {
		if set == nil {
			var err error
			if set, err = p.store.Read(); err != nil {
				p.log.Warn().Err(err).Msg("the pins' fields cannot be read: the log cannot name what changed")
				set = pins.NewSet()
			}
		}
		p.logPinned(p.pinState(n, set), p.mode)
	}
}

// pinState is what n says, with the fields of its live definition and of
// its pin in set (if set has the pin in force).
func (p *Pinning) pinState(n pinNote, set *pins.Set) PinState {
	st := PinState{Kind: n.kind, Name: n.name, Server: n.server, Held: n.held}
	if n.live != nil {
		def, err := pins.Canonical(n.kind, n.name, n.server, n.live.Orig, n.live.Def)
		if err != nil {
			def = pins.Def{Kind: n.kind, Name: n.name}
		}
		st.Live = &def
	}
	if !n.pinned {
		return st
	}
	pin := pins.Pin{Def: pins.Def{Kind: n.kind, Name: n.name}, Digest: n.pin.String()}
	if full, ok := set.Get(n.kind, n.name); ok && full.Digest == pin.Digest {
		pin = full
		if st.Live != nil {
			st.Changed = pins.Changed(pin.Def, *st.Live)
		}
	}
	st.Pinned = &pin
	return st
}

// pinFresh pins on first sight the entries applyPins returned; tofu says
// they are trusted on first use (pinWork.tofu).
func (p *Pinning) pinFresh(fresh []*catalog.Entry, tofu bool) {
	if len(fresh) == 0 {
		return
	}
	ps := make([]pins.Pin, 0, len(fresh))
	for _, e := range fresh {
		pk, _ := catalog.PinKindOf(e.Kind)
		def, err := pins.Canonical(pk, e.Name, e.Server, e.Orig, e.Def)
		if err != nil {
			continue // logged when its digest was not computed; it matches no pin
		}
		ps = append(ps, pins.NewPin(def))
	}
	p.store.Pin(ps)
	msg := "tools and prompts pinned on first sight"
	if p.store.ReadOnly() {
		msg = "tools and prompts seen for the first time: pinned for this run only (the pin file is not written)"
	}
	ev := p.log.Info()
	if tofu {
		// Once: from now on there are pins, and a first sight is held.
		ev = p.log.Warn()
		msg += ": trust on first use, as there are no pins yet; from now on a tool or prompt never seen before is held until approved (pinning = \"enforce\")"
		if !p.store.ReadOnly() {
			msg += "; review the pin file and commit it"
		}
	}
	ev.Int("pinned", len(ps)).Str("pin_file", p.store.Path()).Msg(msg)
}

// logPinned writes the one log line of a definition that differs from its
// pin, or of a new one held.
func (p *Pinning) logPinned(st PinState, mode string) {
	action := "exposed with its new definition"
	if st.Held {
		action = "held: not listed, and refused like an unknown name, until approved"
	}
	ev := p.log.Warn().Str("kind", string(st.Kind)).Str(string(st.Kind), st.Name).Str("server", st.Server).
		Str("pinning", mode).Bool("held", st.Held)
	if st.Pinned == nil {
		ev.Msg("new " + string(st.Kind) + " never pinned: " + action + "; review with mcpmux pins diff")
		return
	}
	ev.Strs("changed", st.Changed).Msg(string(st.Kind) + " definition differs from its pin: " + action + "; review with mcpmux pins diff")
}

// HeldBy returns the alias of the tool or prompt of kind k exposed as name
// if pinning holds it.
func (p *Pinning) HeldBy(k catalog.Kind, name string) (string, bool) {
	pk, ok := catalog.PinKindOf(k)
	if p == nil || !ok {
		return "", false
	}
	alias, ok := p.view.Load().held[pinKey{pk, name}]
	return alias, ok
}

// Status is PinStatus.
func (p *Pinning) Status() PinCounts {
	if p == nil {
		return PinCounts{Mode: config.PinningOff}
	}
	c := p.view.Load().counts
	c.Mode = p.mode
	c.InMemory = p.store.InMemory()
	c.Changes = p.changes.Load()
	c.FileErr = p.store.LastError()
	return c
}

// Report is PinReport.
func (p *Pinning) Report() []PinState {
	if p == nil {
		return nil
	}
	view := p.view.Load()
	if len(view.report)+len(view.fresh) == 0 {
		return nil
	}
	set, err := p.store.Read()
	if err != nil {
		p.log.Warn().Err(err).Msg("the pins' fields cannot be read")
		set = pins.NewSet()
	}
	out := make([]PinState, 0, len(view.report)+len(view.fresh))
	for _, e := range view.fresh {
		pk, _ := catalog.PinKindOf(e.Kind)
		out = append(out, p.pinState(pinNote{kind: pk, name: e.Name, server: e.Server, live: e}, set))
	}
	for _, n := range view.report {
		out = append(out, p.pinState(n, set))
	}
	return out
}
