package pipeline

import (
	"time"

	"github.com/mcpmux/mcpmux/config"
)

// Settings are the values of the config outside the server list that a
// reload changes while requests run. A request reads them once, as it
// starts, with one atomic load; a request in flight keeps the ones it read.
type Settings struct {
	CallTimeout time.Duration
	RateLimit   float64 // calls per second per identity; 0 is no limit
	RateBurst   int
	PageSize    int // of the upstream lists; 0 is one page
	// Catalog and SearchAbove are the config's catalog mode (searchmode).
	Catalog     string
	SearchAbove int
}

// SettingsOf returns the settings cfg gives.
func SettingsOf(cfg *config.Config) *Settings {
	return &Settings{CallTimeout: cfg.Mux.CallTimeout, RateLimit: cfg.Limits.RateLimit,
		RateBurst: cfg.Limits.RateBurst, PageSize: cfg.Mux.PageSize, Catalog: cfg.Mux.Catalog, SearchAbove: cfg.Mux.SearchAbove}
}

// Settings returns the settings in force.
func (m *Pipeline) Settings() *Settings { return m.settings.Load() }

// Retune puts the settings of cfg in force for the requests that start from
// now on.
func (m *Pipeline) Retune(cfg *config.Config) { m.settings.Store(SettingsOf(cfg)) }
