package mux

import (
	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/pins"
	"github.com/mcpmux/mcpmux/policy"
)

// PinUpgrades are whole pins of the tools and prompts whose partial pins
// they match, as the last catalog build found them: what mcpmux pins
// approve writes with the rest.
func (m *Mux) PinUpgrades() []pins.Pin { return m.pub.Pinning().Upgrades() }

// PinsChanged rebuilds the catalog against the pins now in force, telling
// every session whose view changed; the pin file's watch calls it.
func (m *Mux) PinsChanged() {
	if m.starting.Load() {
		return // the first build, when the starts end, reads the pins in force
	}
	m.pub.Rebuild()
}

// PinStatus is what pinning found at the last catalog build.
func (m *Mux) PinStatus() publish.PinCounts { return m.pub.Pinning().Status() }

// PinReport lists every tool and prompt whose live definition is not its
// pin (new ones pinned on sight first, then changed and held ones), and
// every pin of a ready server whose tool or prompt is gone, as the last
// catalog build found them, with their fields (the pins' read from the pin
// file now).
func (m *Mux) PinReport() []publish.PinState { return m.pub.Pinning().Report() }

// PolicyChanged has the sessions of every identity whose view changed told
// that the lists they see changed; the policy watcher calls it once the new
// set is in force.
func (m *Mux) PolicyChanged(old, new *policy.Set) { m.pub.Announcer().Changed(nil) }

// SetPins puts pinning under cfg against store (nil: off) in force and
// rebuilds the catalog under it, telling every session whose view changed.
// Children list what a pin needs only if pinning was on when mcpmux
// started: turning it on or off needs a restart.
func (m *Mux) SetPins(cfg *config.Config, store *pins.Store) {
	m.pub.SetPinning(publish.NewPinning(cfg, store, false, m.log))
	m.PinsChanged()
}
