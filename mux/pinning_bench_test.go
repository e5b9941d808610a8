package mux

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/publish"
	"github.com/mcpmux/mcpmux/pins"
)

// The catalog's benchmarks (catalog_bench_test.go) with pinning = "warn"
// and every tool pinned: what pinning adds to a child's catalog build (a
// digest per distinct definition, none on a re-read) and to the merged
// build (a digest compared per tool). Run with
// go test -run '^$' -bench Pinned -benchmem ./mux.

// pinnedLab is catalogLab with pinning on and every tool pinned.
func pinnedLab(b *testing.B, n int) (*Mux, []json.RawMessage) {
	m, raw := catalogLab(b, n)
	store, err := pins.Open(filepath.Join(b.TempDir(), "mcpmux.lock"), zerolog.Nop(), pins.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := *m.cfg
	cfg.Mux.Pinning = config.PinningWarn
	m.pub.SetPinning(publish.NewPinning(&cfg, store, false, m.log))
	// The children's catalogs again, with digests, then the first sight.
	c := m.list()[0]
	c.Builder().Pinned = true
	var lists [catalog.NumKinds][]json.RawMessage
	lists[catalog.KindTool] = raw
	c.Builder().Forget()
	cat := c.Builder().Build(lists, mcp.ServerCapabilities{})
	c.PublishListed(cat)
	m.pub.Rebuild()
	if got := m.PinStatus(); store.Current().Len() != n || got.New != n {
		b.Fatalf("%d pinned, %d new, want %d", store.Current().Len(), got.New, n)
	}
	m.pub.Rebuild()
	if got := m.PinStatus(); got.Pinned != n {
		b.Fatalf("%d match their pins, want %d", got.Pinned, n)
	}
	return m, raw
}

func BenchmarkPinnedCatalogBuildChild(b *testing.B) { benchBuildChild(b, pinnedLab) }

func BenchmarkPinnedCatalogRebuild(b *testing.B) { benchRebuild(b, pinnedLab) }
