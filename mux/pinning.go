package mux

// Tool and prompt pinning: where the merged catalog is built, each tool's
// and prompt's canonical definition is compared with its pin (package
// pins). A definition that differs from its pin, under pinning =
// "enforce", and one never pinned, under pin_new = "hold", is held: left
// out of the snapshot's lists and registry, so that it is not listed and a
// request for it is refused like one for an unknown name. Nothing here runs
// on the call path but the audit of a refusal, which reads the published
// view through an atomic pointer.

import (
	"crypto/sha256"
	"sync/atomic"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/pins"
)

// DecisionHeld is the audit decision of a request for a tool or prompt
// held by pinning; the caller is told what it is told of an unknown name.
const DecisionHeld Decision = "held"

// pinning is the mux's side of pinning. Its fields but view and changes
// are used only under publishMu.
type pinning struct {
	store   *pins.Store
	enforce bool // a changed definition is held, not only logged
	hold    bool // a definition never pinned is held, not pinned on sight
	mode    string

	digests map[*entry]pinMemo // each entry's digest, kept while the entry is in the catalog
	// byContent keeps each digest by what it was computed from, so that a
	// child's re-read listing the same definitions (new entries) costs a
	// SHA-256 each rather than a canonical form.
	byContent map[contentKey]string
	logged    map[pinKey]string // the digest last logged as differing from its pin
	view      atomic.Pointer[pinView]
	changes   atomic.Uint64 // definitions seen differing from their pins (or held new), each logged once
}

type pinMemo struct {
	digest  string
	content contentKey
}

type contentKey struct {
	kind        pins.Kind
	alias, orig string
	sum         [sha256.Size]byte
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
	report []PinState
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
	Changes  uint64
	FileErr  error // what is wrong with the pin file on disk, if anything
	Disabled bool  // pinning is off
}

// PinState is one tool or prompt whose live definition is not its pin.
type PinState struct {
	Kind   pins.Kind
	Name   string // exposed
	Server string
	// Live is the definition listed now; nil when the pin's tool is gone.
	Live *pins.Def
	// Pinned is the pin; nil for a definition never pinned.
	Pinned *pins.Pin
	// Changed names the fields that differ; nil for a new or gone one.
	Changed []string
	Held    bool
}

// newPinning returns the pinning of cfg over store, nil when pinning is off.
func newPinning(cfg *config.Config, store *pins.Store) *pinning {
	if store == nil || cfg.Mux.Pinning == config.PinningOff {
		return nil
	}
	p := &pinning{
		store:     store,
		mode:      cfg.Mux.Pinning,
		enforce:   cfg.Mux.Pinning == config.PinningEnforce,
		hold:      cfg.Mux.PinNew == config.PinNewHold,
		digests:   map[*entry]pinMemo{},
		byContent: map[contentKey]string{},
		logged:    map[pinKey]string{},
	}
	p.view.Store(&pinView{})
	return p
}

var pinKinds = [...]struct {
	k    kind
	kind pins.Kind
}{{kindTool, pins.Tool}, {kindPrompt, pins.Prompt}}

// applyPins compares next's tools and prompts with their pins, leaves the
// held ones out of next, pins new ones on first sight, logs each
// definition that differs from its pin once, and publishes what it found.
// Called under publishMu, before next is published.
func (m *Mux) applyPins(next *catalog) {
	p := m.pinning
	if p == nil {
		return
	}
	set := p.store.Current()
	digests := make(map[*entry]pinMemo, len(p.digests))
	byContent := make(map[contentKey]string, len(p.byContent))
	logged := map[pinKey]string{}
	view := &pinView{held: map[pinKey]string{}}
	live := map[pinKey]bool{}
	var fresh []pins.Pin
	for _, pk := range pinKinds {
		sec := &next.kinds[pk.k]
		kept := sec.list[:0]
		for _, e := range sec.list {
			key := pinKey{pk.kind, e.name}
			live[key] = true
			memo, ok := p.digests[e]
			if !ok {
				memo.content = contentKey{pk.kind, e.child.alias, e.orig, sha256.Sum256(e.def)}
				if memo.digest, ok = p.byContent[memo.content]; !ok {
					_, memo.digest = canonicalPin(pk.kind, e)
				}
			}
			digests[e], byContent[memo.content] = memo, memo.digest
			digest := memo.digest
			pin, pinned := set.Get(pk.kind, e.name)
			if pinned && pin.Digest == digest {
				view.counts.Pinned++
				kept = append(kept, e)
				continue
			}
			def, _ := canonicalPin(pk.kind, e)
			st := PinState{Kind: pk.kind, Name: e.name, Server: e.child.alias, Live: &def}
			if pinned {
				st.Pinned = &pin
				st.Changed = pins.Changed(pin.Def, def)
				st.Held = p.enforce
				view.counts.Changed++
			} else {
				st.Held = p.hold
				view.counts.New++
			}
			view.report = append(view.report, st)
			if !st.Held && !pinned {
				fresh = append(fresh, pins.Pin{Def: def, Digest: digest})
				kept = append(kept, e)
				continue
			}
			logged[key] = digest
			if p.logged[key] != digest {
				p.changes.Add(1)
				m.logPinned(st, p.mode)
			}
			if !st.Held {
				kept = append(kept, e)
				continue
			}
			view.counts.Held++
			view.held[key] = e.child.alias
			delete(sec.byName, e.name)
		}
		clear(sec.list[len(kept):]) // no held entry stays reachable
		sec.list = kept
	}
	ready := map[string]bool{}
	for _, c := range m.children {
		ready[c.alias] = c.state.Load().listed != nil
	}
	for _, pin := range set.All() {
		if !live[pinKey{pin.Kind, pin.Name}] && ready[pin.Server()] {
			view.counts.Gone++
			view.report = append(view.report, PinState{Kind: pin.Kind, Name: pin.Name, Server: pin.Server(), Pinned: &pin})
		}
	}
	p.digests, p.byContent, p.logged = digests, byContent, logged
	if len(fresh) > 0 {
		p.store.Pin(fresh)
		m.log.Info().Int("pinned", len(fresh)).Str("pin_file", p.store.Path()).Msg("tools and prompts pinned on first sight")
	}
	view.counts.Mode = p.mode
	p.view.Store(view)
}

// canonicalPin returns e's canonical definition and its digest. A
// definition the catalog accepted is a JSON object, so it cannot fail; if
// it did, the empty digest differs from every pin.
func canonicalPin(k pins.Kind, e *entry) (pins.Def, string) {
	def, err := pins.Canonical(k, e.name, e.child.alias, e.orig, e.def)
	if err != nil {
		e.child.log.Error().Err(err).Msg("definition has no canonical form: it matches no pin")
		return pins.Def{Kind: k, Name: e.name}, ""
	}
	return def, def.Digest()
}

// logPinned writes the one log line of a definition that differs from its
// pin, or of a new one held.
func (m *Mux) logPinned(st PinState, mode string) {
	action := "exposed with its new definition"
	if st.Held {
		action = "held: not listed, and refused like an unknown name, until approved"
	}
	ev := m.log.Warn().Str("kind", string(st.Kind)).Str(string(st.Kind), st.Name).Str("server", st.Server).
		Str("pinning", mode).Bool("held", st.Held)
	if st.Pinned == nil {
		ev.Msg("new " + string(st.Kind) + " not pinned (pin_new = \"hold\"): " + action + "; review with mcpmux pins diff")
		return
	}
	ev.Strs("changed", st.Changed).Msg(string(st.Kind) + " definition differs from its pin: " + action + "; review with mcpmux pins diff")
}

// PinsChanged rebuilds the catalog against the pins now in force, telling
// every session whose view changed; the pin file's watch calls it.
func (m *Mux) PinsChanged() {
	if m.starting.Load() {
		return // the first build, when the starts end, reads the pins in force
	}
	m.rebuildCatalog()
}

// heldBy returns the alias of the tool or prompt of kind k exposed as name
// if pinning holds it.
func (m *Mux) heldBy(k kind, name string) (string, bool) {
	if m.pinning == nil {
		return "", false
	}
	for _, pk := range pinKinds {
		if pk.k == k {
			alias, ok := m.pinning.view.Load().held[pinKey{pk.kind, name}]
			return alias, ok
		}
	}
	return "", false
}

// PinStatus is what pinning found at the last catalog build.
func (m *Mux) PinStatus() PinCounts {
	p := m.pinning
	if p == nil {
		return PinCounts{Mode: config.PinningOff, Disabled: true}
	}
	c := p.view.Load().counts
	c.Mode = p.mode
	c.InMemory = p.store.InMemory()
	c.Changes = p.changes.Load()
	c.FileErr = p.store.LastError()
	return c
}

// PinReport lists every tool and prompt whose live definition is not its
// pin (new, changed, held), and every pin of a ready server whose tool or
// prompt is gone, as the last catalog build found them.
func (m *Mux) PinReport() []PinState {
	if m.pinning == nil {
		return nil
	}
	return m.pinning.view.Load().report
}
