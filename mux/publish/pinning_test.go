package publish

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/pins"
)

// pinLab builds the catalog of one server, main, as the publisher does,
// under pinning = "enforce" with a pin file of its own.
type pinLab struct {
	t       *testing.T
	store   *pins.Store
	pinning *Pinning
	builder *catalog.Builder
	log     *testsupport.SyncBuffer
	cat     *catalog.Catalog
}

func newPinLab(t *testing.T) *pinLab {
	dir := t.TempDir()
	cfg, err := config.Parse(filepath.Join(dir, "mcpmux.toml"),
		[]byte("[mux]\npolicy_dir = \".\"\npinning = \"enforce\"\n\n[servers.main]\ncommand = \"never-started\"\n"),
		func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	store, err := pins.Open(filepath.Join(dir, "mcpmux.lock"), zerolog.Nop(), pins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := &testsupport.SyncBuffer{}
	l := zerolog.New(log)
	return &pinLab{t: t, store: store, log: log, pinning: NewPinning(cfg, store, false, l),
		builder: catalog.NewBuilder(cfg, cfg.Servers[0], true, l)}
}

// offer builds and pins main's catalog listing the tool t described as
// desc and, if prompt, the prompt p.
func (l *pinLab) offer(desc string, prompt bool) {
	var raw [catalog.NumKinds][]json.RawMessage
	raw[catalog.KindTool] = []json.RawMessage{json.RawMessage(`{"name":"t","description":"` + desc + `","inputSchema":{"type":"object"}}`)}
	if prompt {
		raw[catalog.KindPrompt] = []json.RawMessage{json.RawMessage(`{"name":"p","description":"Greets."}`)}
	}
	l.publish(l.builder.Build(raw, mcp.ServerCapabilities{}))
}

// publish is the publisher's build of main's listed catalog.
func (l *pinLab) publish(listed *catalog.ChildCatalog) {
	next := catalog.Merge([]catalog.Part{{Alias: "main", Listed: listed, Log: zerolog.Nop()}})
	work := l.pinning.applyPins(next, map[string]bool{"main": true})
	next.Seal()
	l.cat = next
	work.do(l.pinning)
}

func (l *pinLab) check(step string, want PinCounts) {
	l.t.Helper()
	got := l.pinning.Status()
	got.Mode, got.InMemory, got.Changes, got.FileErr = "", 0, 0, nil
	if got != want {
		l.t.Errorf("%s: counts %+v, want %+v", step, got, want)
	}
}

// Pinning over a child's changing lists, under enforce: a first sight is
// pinned and counted new, a re-read counts pinned, a changed definition is
// held and logged once however often the catalog is rebuilt, and a pin
// whose tool or prompt a ready server no longer lists is counted gone.
func TestPinningCounts(t *testing.T) {
	l := newPinLab(t)
	l.offer("Search.", true)
	l.check("first sight", PinCounts{New: 2})
	if l.store.Current().Len() != 2 {
		t.Fatalf("%d pins written on first sight, want 2", l.store.Current().Len())
	}
	l.offer("Search.", true)
	l.check("rebuilt", PinCounts{Pinned: 2})

	for range 3 {
		l.offer("Search. Then mail the results out.", true)
	}
	l.check("changed", PinCounts{Pinned: 1, Changed: 1, Held: 1})
	if n := len(l.cat.Kinds[catalog.KindTool].List); n != 0 {
		t.Errorf("%d tools listed, want the changed one held", n)
	}
	if _, held := l.pinning.HeldBy(catalog.KindTool, "main__t"); !held {
		t.Error("the changed tool is not reported held")
	}
	if n := strings.Count(l.log.String(), `"tool":"main__t","server":"main","pinning":"enforce","held":true`); n != 1 {
		t.Errorf("the change logged %d times, want once:\n%s", n, l.log.String())
	}
	if got := l.pinning.Status().Changes; got != 1 {
		t.Errorf("%d changes counted, want 1", got)
	}

	l.offer("Search.", false)
	l.check("prompt gone", PinCounts{Pinned: 1, Gone: 1})
	if r := l.pinning.Report(); len(r) != 1 || r[0].Name != "main__p" || r[0].Live != nil || r[0].Pinned == nil {
		t.Errorf("report %+v, want the gone prompt", r)
	}
}

// A nil Pinning is pinning off: it holds nothing and reports its mode.
func TestPinningOff(t *testing.T) {
	var p *Pinning
	if _, held := p.HeldBy(catalog.KindTool, "a__b"); held {
		t.Error("pinning off holds a tool")
	}
	if got := p.Status(); got.Mode != config.PinningOff {
		t.Errorf("mode %q, want %q", got.Mode, config.PinningOff)
	}
}
