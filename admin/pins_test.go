package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mcpmux/mcpmux/mux/publish"
)

// Pinning's part of /readyz and /metrics: counts as the mux reports them,
// and held tools do not make mcpmux unready.
func TestPinsReadyAndMetrics(t *testing.T) {
	counts := publish.PinCounts{Mode: "enforce", Pinned: 7, New: 1, Changed: 2, Held: 2, Gone: 1, InMemory: 3, Changes: 4,
		FileErr: errors.New("pin file /etc/mcpmux/mcpmux.lock: read-only file system")}
	var reads atomic.Int32
	status := func() publish.PinCounts { reads.Add(1); return counts }
	m := NewMetrics(testConfig(), nil)
	m.Pins(status)
	srv := httptest.NewServer(Handler(Sources{Metrics: m, Pins: status}))
	defer srv.Close()

	code, _, body := get(t, srv.URL+ReadyPath)
	if code != http.StatusOK {
		t.Fatalf("/readyz %d with held tools:\n%s", code, body)
	}
	var r Readiness
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	want := PinsStatus{Mode: "enforce", Pinned: 7, New: 1, Changed: 2, Held: 2, Gone: 1, InMemory: 3}
	if r.Pins == nil || r.Pins.LastErr == nil || *r.Pins.LastErr != counts.FileErr.Error() {
		t.Fatalf("/readyz pins: %s", body)
	}
	got := *r.Pins
	got.LastErr = nil
	if got != want {
		t.Fatalf("/readyz pins = %+v, want %+v", got, want)
	}

	reads.Store(0)
	f := scrape(t, srv)
	if n := reads.Load(); n != 1 {
		t.Errorf("a scrape read the pin status %d times, want once", n)
	}
	for state, v := range map[string]float64{"pinned": 7, "new": 1, "changed": 2, "held": 2, "gone": 1, "in_memory": 3} {
		wantValue(t, f, v, "mcpmux_pins", "state="+state)
	}
	wantValue(t, f, 4, "mcpmux_pin_changes_total")
}
