package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/pipeline"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux"
)

func testConfig() *config.Config {
	return &config.Config{Servers: []config.Server{
		{Alias: "docs", Required: true},
		{Alias: "git", Required: true},
		{Alias: "extra", Required: false},
	}}
}

// fixedIDs returns an identities func over a list that tests can change.
func fixedIDs(ids ...string) (func() []string, func(...string)) {
	var mu sync.Mutex
	cur := ids
	get := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(cur)
	}
	set := func(ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		cur = ids
	}
	return get, set
}

// scrape GETs /metrics from srv and parses the text exposition.
func scrape(t *testing.T, srv *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+MetricsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// find returns the metric of family name whose labels are exactly labels
// ("k=v" pairs), or nil.
func find(fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	mf := fams[name]
	if mf == nil {
		return nil
	}
	want := map[string]string{}
	for _, kv := range labels {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = v
	}
next:
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	m := find(fams, name, labels...)
	if m == nil {
		t.Fatalf("no %s%v in /metrics", name, labels)
	}
	switch fams[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_UNTYPED:
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("%s is a %s", name, fams[name].GetType())
	return 0
}

func wantValue(t *testing.T, fams map[string]*dto.MetricFamily, want float64, name string, labels ...string) {
	t.Helper()
	if got := value(t, fams, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func wantAbsent(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) {
	t.Helper()
	if m := find(fams, name, labels...); m != nil {
		t.Errorf("%s%v is exposed (%v), want absent", name, labels, m)
	}
}

// labelValues returns every value of label in family name.
func labelValues(fams map[string]*dto.MetricFamily, name, label string) []string {
	var out []string
	for _, m := range fams[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && !slices.Contains(out, lp.GetValue()) {
				out = append(out, lp.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Histogram {
	t.Helper()
	if fams[name].GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s is a %s, want a histogram", name, fams[name].GetType())
	}
	m := find(fams, name, labels...)
	if m == nil {
		t.Fatalf("no %s%v in /metrics", name, labels)
	}
	return m.GetHistogram()
}

// bucket returns the cumulative count of h's bucket with upper bound le.
func bucket(t *testing.T, h *dto.Histogram, le float64) uint64 {
	t.Helper()
	for _, b := range h.GetBucket() {
		if math.Abs(b.GetUpperBound()-le) < 1e-12 {
			return b.GetCumulativeCount()
		}
	}
	t.Fatalf("no bucket le=%v", le)
	return 0
}

func newServer(t *testing.T, m *Metrics, status func() []mux.ChildStatus, required map[string]bool, policy func() (uint64, error)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(Sources{Metrics: m, Status: status, Required: required, Policy: policy}))
	t.Cleanup(srv.Close)
	return srv
}

func TestMetricsFromTraffic(t *testing.T) {
	ids, _ := fixedIDs("alice", "bob")
	m := NewMetrics(testConfig(), ids)
	srv := newServer(t, m, nil, nil, func() (uint64, error) { return 7, nil })

	// Three allowed calls to docs by alice, one to git by bob.
	for _, d := range []struct{ total, child time.Duration }{
		{3 * time.Millisecond, 2 * time.Millisecond},
		{20 * time.Millisecond, 19*time.Millisecond + 800*time.Microsecond},
		{2 * time.Second, 1900 * time.Millisecond},
	} {
		m.CallStarted("docs")
		m.CallFinished("docs")
		m.CallDone(pipeline.CallRecord{Identity: "alice", Tool: "docs__search", Server: "docs",
			Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeOK, Total: d.total, Child: d.child})
	}
	m.CallStarted("git")
	m.CallFinished("git")
	m.CallDone(pipeline.CallRecord{Identity: "bob", Tool: "git__log", Server: "git",
		Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeTimeout, Total: 61 * time.Second, Child: 60 * time.Second})
	// Refusals: denied by policy, an unknown name, a hidden tool, an
	// identity with no policy file and a call with no identity.
	m.CallDone(pipeline.CallRecord{Identity: "bob", Tool: "docs__search", Server: "docs",
		Decision: pipeline.DecisionDenied, Outcome: pipeline.OutcomeRefused, Total: time.Millisecond})
	m.CallDone(pipeline.CallRecord{Identity: "alice", Decision: pipeline.DecisionUnknown, Outcome: pipeline.OutcomeRefused})
	m.CallDone(pipeline.CallRecord{Identity: "alice", Server: "docs", Decision: pipeline.DecisionHidden, Outcome: pipeline.OutcomeRefused})
	m.CallDone(pipeline.CallRecord{Identity: "mallory", Tool: "docs__search", Server: "docs",
		Decision: pipeline.DecisionDenied, Outcome: pipeline.OutcomeRefused})
	m.CallDone(pipeline.CallRecord{Identity: "eve", Tool: "docs__search", Server: "docs",
		Decision: pipeline.DecisionDenied, Outcome: pipeline.OutcomeRefused})
	m.CallDone(pipeline.CallRecord{Tool: "git__log", Server: "git", Decision: pipeline.DecisionDenied, Outcome: pipeline.OutcomeRefused})
	// One call still in flight on git.
	m.CallStarted("git")

	m.ChildPhase("docs", child.PhaseReady)
	m.ChildPhase("git", child.PhaseReady)
	m.ChildRestarted("git")
	m.ChildPhase("git", child.PhaseRestarting)
	m.ChildRestarted("git")

	m.Session("alice", +1)
	m.Session("alice", +1)
	m.Session("alice", -1)
	m.Session("mallory", +1)
	m.Session("eve", +1)
	m.Session("", +1)

	m.PolicyReloaded(nil)
	m.PolicyReloaded(errors.New("bob.toml:3: bad"))
	m.PolicyReloaded(nil)

	f := scrape(t, srv)

	const calls = "mcpmux_calls_total"
	wantValue(t, f, 3, calls, "identity=alice", "tool=docs__search", "server=docs", "decision=allowed", "outcome=ok")
	wantValue(t, f, 1, calls, "identity=bob", "tool=git__log", "server=git", "decision=allowed", "outcome=timeout")
	wantValue(t, f, 1, calls, "identity=bob", "tool=docs__search", "server=docs", "decision=denied", "outcome=refused")
	wantValue(t, f, 1, calls, "identity=alice", "tool=unknown", "server=none", "decision=unknown", "outcome=refused")
	wantValue(t, f, 1, calls, "identity=alice", "tool=unknown", "server=docs", "decision=hidden", "outcome=refused")
	wantValue(t, f, 2, calls, "identity=other", "tool=docs__search", "server=docs", "decision=denied", "outcome=refused")
	wantValue(t, f, 1, calls, "identity=none", "tool=git__log", "server=git", "decision=denied", "outcome=refused")
	if got, want := labelValues(f, calls, "identity"), []string{"alice", "bob", "none", "other"}; !slices.Equal(got, want) {
		t.Errorf("identity labels of %s = %v, want %v", calls, got, want)
	}
	if n := len(f[calls].GetMetric()); n != 7 {
		t.Errorf("%s has %d series, want 7", calls, n)
	}

	// Child time: 2ms, 19.8ms, 1.9s on docs; 60s on git.
	h := histogram(t, f, "mcpmux_call_duration_seconds", "server=docs")
	if h.GetSampleCount() != 3 {
		t.Errorf("docs call_duration count = %d, want 3", h.GetSampleCount())
	}
	if got, want := h.GetSampleSum(), 0.002+0.0198+1.9; math.Abs(got-want) > 1e-9 {
		t.Errorf("docs call_duration sum = %v, want %v", got, want)
	}
	for le, want := range map[float64]uint64{.001: 0, .0025: 1, .01: 1, .025: 2, 1: 2, 2.5: 3, 60: 3} {
		if got := bucket(t, h, le); got != want {
			t.Errorf("docs call_duration bucket le=%v = %d, want %d", le, got, want)
		}
	}
	h = histogram(t, f, "mcpmux_call_duration_seconds", "server=git")
	if h.GetSampleCount() != 1 || bucket(t, h, 30) != 0 || bucket(t, h, 60) != 1 {
		t.Errorf("git call_duration = %v, want one sample in le=60", h)
	}
	// Overhead: 1ms, 200µs, 100ms on docs; 1s on git (above every bucket).
	h = histogram(t, f, "mcpmux_call_overhead_seconds", "server=docs")
	if h.GetSampleCount() != 3 {
		t.Errorf("docs call_overhead count = %d, want 3", h.GetSampleCount())
	}
	if got, want := h.GetSampleSum(), 0.001+0.0002+0.1; math.Abs(got-want) > 1e-9 {
		t.Errorf("docs call_overhead sum = %v, want %v", got, want)
	}
	for le, want := range map[float64]uint64{.00005: 0, .00025: 1, .001: 2, .05: 2, .1: 3} {
		if got := bucket(t, h, le); got != want {
			t.Errorf("docs call_overhead bucket le=%v = %d, want %d", le, got, want)
		}
	}
	if b := finiteBounds(h); b[0] != 50e-6 || b[len(b)-1] != 0.1 {
		t.Errorf("overhead buckets = %v, want 5e-05..0.1", b)
	}
	if b := finiteBounds(histogram(t, f, "mcpmux_call_duration_seconds", "server=docs")); b[0] != .001 || b[len(b)-1] != 60 {
		t.Errorf("child buckets = %v, want 0.001..60", b)
	}
	h = histogram(t, f, "mcpmux_call_overhead_seconds", "server=git")
	if h.GetSampleCount() != 1 || bucket(t, h, .1) != 0 {
		t.Errorf("git call_overhead = %v, want one sample above the buckets", h)
	}
	// Refused calls are not timed.
	wantAbsent(t, f, "mcpmux_call_duration_seconds", "server=none")
	h = histogram(t, f, "mcpmux_call_duration_seconds", "server=extra")
	if h.GetSampleCount() != 0 {
		t.Errorf("extra call_duration count = %d, want 0", h.GetSampleCount())
	}

	wantValue(t, f, 0, "mcpmux_calls_in_flight", "server=docs")
	wantValue(t, f, 1, "mcpmux_calls_in_flight", "server=git")
	wantValue(t, f, 0, "mcpmux_calls_in_flight", "server=extra")

	wantValue(t, f, 0, "mcpmux_child_restarts_total", "server=docs")
	wantValue(t, f, 2, "mcpmux_child_restarts_total", "server=git")
	wantValue(t, f, 1, "mcpmux_child_up", "server=docs")
	wantValue(t, f, 0, "mcpmux_child_up", "server=git")
	wantValue(t, f, 0, "mcpmux_child_up", "server=extra")
	for _, c := range []struct {
		server string
		phase  child.Phase
	}{{"docs", child.PhaseReady}, {"git", child.PhaseRestarting}, {"extra", child.PhaseStarting}} {
		for _, p := range phases {
			want := 0.0
			if p == c.phase {
				want = 1
			}
			wantValue(t, f, want, "mcpmux_child_state", "server="+c.server, "state="+string(p))
		}
	}

	wantValue(t, f, 3, "mcpmux_policy_reloads_total")
	wantValue(t, f, 1, "mcpmux_policy_reload_errors_total")
	wantValue(t, f, 7, "mcpmux_policy_generation")

	wantValue(t, f, 1, "mcpmux_sessions", "identity=alice")
	wantValue(t, f, 0, "mcpmux_sessions", "identity=bob")
	wantValue(t, f, 2, "mcpmux_sessions", "identity=other")
	wantValue(t, f, 1, "mcpmux_sessions", "identity=none")
	if got, want := labelValues(f, "mcpmux_sessions", "identity"), []string{"alice", "bob", "none", "other"}; !slices.Equal(got, want) {
		t.Errorf("identity labels of mcpmux_sessions = %v, want %v", got, want)
	}

	// The Go and process collectors are there too.
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if f[name] == nil {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	// Every mcpmux metric has HELP text.
	for name, mf := range f {
		if strings.HasPrefix(name, "mcpmux_") && mf.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
}

// TestMetricNames checks the metrics against Prometheus' own lint (naming
// conventions, units, HELP) and that every one is exposed from the start.
func TestMetricNames(t *testing.T) {
	m := NewMetrics(testConfig(), nil)
	// Make every vector have a series, so that the lint sees it.
	m.CallDone(pipeline.CallRecord{Identity: "x", Tool: "docs__a", Server: "docs", Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeOK})
	m.Session("x", 1)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "mcpmux_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range fams {
		if strings.HasPrefix(mf.GetName(), "mcpmux_") {
			names = append(names, mf.GetName())
		}
	}
	want := []string{
		"mcpmux_call_duration_seconds",
		"mcpmux_call_overhead_seconds",
		"mcpmux_calls_in_flight",
		"mcpmux_calls_total",
		"mcpmux_child_restarts_total",
		"mcpmux_child_state",
		"mcpmux_child_up",
		"mcpmux_policy_generation",
		"mcpmux_policy_reload_errors_total",
		"mcpmux_policy_reloads_total",
		"mcpmux_sessions",
	}
	if !slices.Equal(names, want) {
		t.Errorf("metrics = %v\nwant %v", names, want)
	}
}

// TestIdentityCardinality checks that identities are bounded by the policy
// files, that the bound follows reloads, and that a session is taken off
// the series it was counted in whatever happened to its identity.
func TestIdentityCardinality(t *testing.T) {
	ids, setIDs := fixedIDs("alice")
	m := NewMetrics(testConfig(), ids)
	srv := newServer(t, m, nil, nil, nil)

	denied := func(id string) {
		m.CallDone(pipeline.CallRecord{Identity: id, Tool: "docs__a", Server: "docs", Decision: pipeline.DecisionDenied, Outcome: pipeline.OutcomeRefused})
	}
	for i := range 100 {
		denied(fmt.Sprintf("stranger-%d", i))
	}
	denied("alice")
	denied("carol")
	m.Session("carol", 1)

	f := scrape(t, srv)
	if got, want := labelValues(f, "mcpmux_calls_total", "identity"), []string{"alice", "other"}; !slices.Equal(got, want) {
		t.Errorf("identity labels = %v, want %v", got, want)
	}
	wantValue(t, f, 101, "mcpmux_calls_total", "identity=other", "tool=docs__a", "server=docs", "decision=denied", "outcome=refused")
	wantValue(t, f, 1, "mcpmux_sessions", "identity=other")

	// carol gets a policy file.
	setIDs("alice", "carol")
	m.PolicyReloaded(nil)
	denied("carol")
	f = scrape(t, srv)
	wantValue(t, f, 1, "mcpmux_calls_total", "identity=carol", "tool=docs__a", "server=docs", "decision=denied", "outcome=refused")
	wantValue(t, f, 1, "mcpmux_sessions", "identity=carol")
	wantAbsent(t, f, "mcpmux_sessions", "identity=other")

	// carol's session closes; it leaves no trace, not a -1 elsewhere.
	m.Session("carol", -1)
	f = scrape(t, srv)
	wantValue(t, f, 0, "mcpmux_sessions", "identity=carol")
	wantValue(t, f, 0, "mcpmux_sessions", "identity=alice")
	wantAbsent(t, f, "mcpmux_sessions", "identity=other")

	// alice's file goes away while she has a session open; a scrape alone
	// picks the change up.
	m.Session("alice", 1)
	setIDs("carol")
	f = scrape(t, srv)
	wantValue(t, f, 1, "mcpmux_sessions", "identity=other")
	wantAbsent(t, f, "mcpmux_sessions", "identity=alice")
	m.Session("alice", -1)
	f = scrape(t, srv)
	wantAbsent(t, f, "mcpmux_sessions", "identity=other")
}

// TestUnconfiguredServer checks that an alias outside the config cannot
// add series beyond one "other".
func TestUnconfiguredServer(t *testing.T) {
	m := NewMetrics(testConfig(), nil)
	srv := newServer(t, m, nil, nil, nil)
	for _, alias := range []string{"x", "y"} {
		m.CallStarted(alias)
		m.CallFinished(alias)
		m.ChildRestarted(alias)
		m.CallDone(pipeline.CallRecord{Identity: "a", Tool: alias + "__t", Server: alias,
			Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeOK, Total: time.Millisecond})
	}
	f := scrape(t, srv)
	if got, want := labelValues(f, "mcpmux_child_restarts_total", "server"), []string{"docs", "extra", "git", "other"}; !slices.Equal(got, want) {
		t.Errorf("server labels = %v, want %v", got, want)
	}
	wantValue(t, f, 2, "mcpmux_child_restarts_total", "server=other")
	if h := histogram(t, f, "mcpmux_call_duration_seconds", "server=other"); h.GetSampleCount() != 2 {
		t.Errorf("other call_duration count = %d, want 2", h.GetSampleCount())
	}
}

// TestObserverConcurrent runs the Observer from many goroutines, for the
// race detector and for exact totals.
func TestObserverConcurrent(t *testing.T) {
	ids, _ := fixedIDs("alice")
	m := NewMetrics(testConfig(), ids)
	srv := newServer(t, m, nil, nil, nil)
	const workers, perWorker = 8, 200
	var wg sync.WaitGroup
	var scrapes atomic.Int32
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get(srv.URL + MetricsPath)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				scrapes.Add(1)
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				m.Session("alice", 1)
				m.CallStarted("docs")
				m.ChildPhase("git", phases[(w+i)%len(phases)])
				m.CallFinished("docs")
				m.CallDone(pipeline.CallRecord{Identity: "alice", Tool: "docs__a", Server: "docs",
					Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeOK, Total: 2 * time.Millisecond, Child: time.Millisecond})
				if i%50 == 0 {
					m.PolicyReloaded(nil)
				}
				m.Session("alice", -1)
			}
		})
	}
	wg.Wait()
	close(stop)
	m.ChildPhase("git", child.PhaseDown)
	f := scrape(t, srv)
	wantValue(t, f, workers*perWorker, "mcpmux_calls_total", "identity=alice", "tool=docs__a", "server=docs", "decision=allowed", "outcome=ok")
	wantValue(t, f, 0, "mcpmux_calls_in_flight", "server=docs")
	wantValue(t, f, 0, "mcpmux_sessions", "identity=alice")
	wantValue(t, f, workers*perWorker/50, "mcpmux_policy_reloads_total")
	var ones float64
	for _, p := range phases {
		ones += value(t, f, "mcpmux_child_state", "server=git", "state="+string(p))
	}
	if ones != 1 {
		t.Errorf("git is in %v states at once", ones)
	}
	wantValue(t, f, 1, "mcpmux_child_state", "server=git", "state=down")
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

func TestHealthz(t *testing.T) {
	srv := newServer(t, NewMetrics(testConfig(), nil), func() []mux.ChildStatus {
		return []mux.ChildStatus{{Alias: "docs", Phase: child.PhaseDown}}
	}, nil, nil)
	code, _, body := get(t, srv.URL+HealthPath)
	if code != http.StatusOK || string(body) != "ok" {
		t.Errorf("GET /healthz = %d %q, want 200 \"ok\" even with a child down", code, body)
	}
	resp, err := http.Post(srv.URL+HealthPath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", resp.StatusCode)
	}
	resp, err = http.Head(srv.URL + HealthPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /healthz = %d, want 200", resp.StatusCode)
	}
	if code, _, _ := get(t, srv.URL+"/nope"); code != http.StatusNotFound {
		t.Errorf("GET /nope = %d, want 404", code)
	}
}

func TestReadyz(t *testing.T) {
	var mu sync.Mutex
	children := []mux.ChildStatus{
		{Alias: "docs", Phase: child.PhaseStarting},
		{Alias: "git", Phase: child.PhaseStarting},
		{Alias: "extra", Phase: child.PhaseStarting},
	}
	setPhase := func(alias string, p child.Phase, attempt int, err error, tools int) {
		mu.Lock()
		defer mu.Unlock()
		for i := range children {
			if children[i].Alias == alias {
				children[i] = mux.ChildStatus{Alias: alias, Phase: p, Attempt: attempt, LastErr: err, Tools: tools}
			}
		}
	}
	status := func() []mux.ChildStatus {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(children)
	}
	var gen atomic.Uint64
	gen.Store(1)
	var policyErr atomic.Pointer[error]
	policy := func() (uint64, error) {
		if e := policyErr.Load(); e != nil {
			return gen.Load(), *e
		}
		return gen.Load(), nil
	}
	cfg := testConfig()
	srv := newServer(t, NewMetrics(cfg, nil), status, Required(cfg), policy)

	ready := func(wantCode int) Readiness {
		t.Helper()
		code, hdr, body := get(t, srv.URL+ReadyPath)
		if code != wantCode {
			t.Fatalf("GET /readyz = %d, want %d; body %s", code, wantCode, body)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		var r Readiness
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		if r.Ready != (wantCode == http.StatusOK) {
			t.Errorf("ready = %v with status %d", r.Ready, code)
		}
		return r
	}

	ready(http.StatusServiceUnavailable)
	setPhase("docs", child.PhaseReady, 1, nil, 4)
	ready(http.StatusServiceUnavailable)
	setPhase("git", child.PhaseReady, 1, nil, 2)
	// extra is not required: its phase does not matter.
	r := ready(http.StatusOK)
	if len(r.Servers) != 3 || r.Servers[2].Name != "extra" || r.Servers[2].Required || r.Servers[2].State != "starting" {
		t.Errorf("servers = %+v", r.Servers)
	}
	setPhase("extra", child.PhaseDown, 3, fmt.Errorf("server extra: start /opt/x: %w", exec.ErrNotFound), 0)
	ready(http.StatusOK)

	// git goes away; its last error quotes a remote body, which /readyz
	// must not show.
	setPhase("git", child.PhaseRestarting, 2, errors.New("server git: initialize: request failed with status 502: internal secret 7f3e"), 2)
	gen.Store(5)
	pe := errors.New("bob.toml:3: unknown key")
	policyErr.Store(&pe)
	r = ready(http.StatusServiceUnavailable)
	want := []ServerStatus{
		{Name: "docs", State: "ready", Required: true, Attempt: 1, Tools: 4},
		{Name: "git", State: "restarting", Required: true, Attempt: 2, Reason: ptr("http 5xx"), Tools: 2},
		{Name: "extra", State: "down", Required: false, Attempt: 3, Reason: ptr("start failed")},
	}
	if !equalServers(r.Servers, want) {
		t.Errorf("servers = %s\nwant %s", show(r.Servers), show(want))
	}
	if r.Policy.Generation != 5 || r.Policy.LastErr == nil || *r.Policy.LastErr != pe.Error() {
		t.Errorf("policy = %s", show(r.Policy))
	}

	// And comes back.
	setPhase("git", child.PhaseReady, 2, nil, 3)
	policyErr.Store(nil)
	r = ready(http.StatusOK)
	if r.Policy.LastErr != nil || r.Servers[1].Reason != nil {
		t.Errorf("errors left after recovery: %s", show(r))
	}

	// The raw JSON has exactly the documented keys, with null for no error.
	_, _, body := get(t, srv.URL+ReadyPath)
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if got := sortedKeysOf(raw); !slices.Equal(got, []string{"policy", "ready", "servers"}) {
		t.Errorf("keys = %v", got)
	}
	srv0 := raw["servers"].([]any)[0].(map[string]any)
	if got := sortedKeysOf(srv0); !slices.Equal(got, []string{"attempt", "name", "reason", "required", "state", "tools"}) {
		t.Errorf("server keys = %v", got)
	}
	if v, ok := srv0["reason"]; !ok || v != nil {
		t.Errorf("reason = %v, want null", v)
	}
	pol := raw["policy"].(map[string]any)
	if got := sortedKeysOf(pol); !slices.Equal(got, []string{"generation", "last_error"}) {
		t.Errorf("policy keys = %v", got)
	}
}

// TestReadyzRequiredDefaults covers a server missing from required (counted
// as required) and a required server missing from status (not ready).
func TestReadyzRequiredDefaults(t *testing.T) {
	status := []mux.ChildStatus{{Alias: "docs", Phase: child.PhaseReady}, {Alias: "new", Phase: child.PhaseDown}}
	srv := newServer(t, nil, func() []mux.ChildStatus { return status }, map[string]bool{"docs": true}, nil)
	code, _, body := get(t, srv.URL+ReadyPath)
	if code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz = %d with an unlisted child down, want 503; %s", code, body)
	}
	status = status[:1]
	if code, _, body := get(t, srv.URL+ReadyPath); code != http.StatusOK {
		t.Errorf("GET /readyz = %d, want 200; %s", code, body)
	}

	srv = newServer(t, nil, func() []mux.ChildStatus { return nil }, map[string]bool{"docs": true, "opt": false}, nil)
	code, _, body = get(t, srv.URL+ReadyPath)
	var r Readiness
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || len(r.Servers) != 1 || r.Servers[0].Name != "docs" || r.Servers[0].State != "unknown" {
		t.Errorf("GET /readyz = %d %s, want 503 with docs unknown", code, body)
	}
	// Without metrics there is no /metrics.
	if code, _, _ := get(t, srv.URL+MetricsPath); code != http.StatusNotFound {
		t.Errorf("GET /metrics without Metrics = %d, want 404", code)
	}
	// No servers at all: ready.
	srv = newServer(t, nil, nil, nil, nil)
	if code, _, body := get(t, srv.URL+ReadyPath); code != http.StatusOK || !strings.Contains(string(body), `"servers": []`) {
		t.Errorf("GET /readyz with no servers = %d %s", code, body)
	}
}

func TestRequired(t *testing.T) {
	got := Required(testConfig())
	want := map[string]bool{"docs": true, "git": true, "extra": false}
	if len(got) != len(want) {
		t.Fatalf("Required = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Required[%s] = %v, want %v", k, got[k], v)
		}
	}
}

// finiteBounds returns h's bucket bounds but +Inf.
func finiteBounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			out = append(out, b.GetUpperBound())
		}
	}
	return out
}

func ptr(s string) *string { return &s }

func equalServers(a, b []ServerStatus) bool {
	return slices.EqualFunc(a, b, func(x, y ServerStatus) bool {
		if (x.Reason == nil) != (y.Reason == nil) || x.Reason != nil && *x.Reason != *y.Reason {
			return false
		}
		x.Reason, y.Reason = nil, nil
		return x == y
	})
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// With JWT configured, /readyz is 503 while no usable key set is loaded,
// and says so; the state of each part is reported either way.
func TestReadyzJWTKeys(t *testing.T) {
	var keysOK atomic.Bool
	keys := func() (bool, string) {
		if keysOK.Load() {
			return true, "JWT keys in force: 2"
		}
		return false, "no JWT accepted: /etc/mcpmux/jwks.json: no usable key"
	}
	srv := httptest.NewServer(Handler(Sources{Keys: keys}))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		ok   bool
		code int
	}{{false, http.StatusServiceUnavailable}, {true, http.StatusOK}, {false, http.StatusServiceUnavailable}} {
		keysOK.Store(c.ok)
		code, _, body := get(t, srv.URL+ReadyPath)
		var r Readiness
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		_, detail := keys()
		if code != c.code || r.Ready != c.ok || r.Auth == nil || r.Auth.KeysOK != c.ok || r.Auth.Detail != detail {
			t.Errorf("keys ok=%v: /readyz %d %s", c.ok, code, body)
		}
	}
	// Without Keys there is no auth part.
	srv2 := newServer(t, nil, nil, nil, nil)
	if _, _, body := get(t, srv2.URL+ReadyPath); strings.Contains(string(body), `"auth"`) {
		t.Errorf("/readyz without JWT: %s", body)
	}
}

// Reason turns every kind of child failure into a short class, and never
// passes on text a remote server or a child wrote. The failures mux words
// itself carry their class from where they happen (mux's reason tests make
// each one); an error whose kind nothing shows is "error", whatever its text.
func TestReason(t *testing.T) {
	const secret = "SECRET-remote-body-91c2"
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("server git: initialize: transport error: dial: %w", refused), "connection refused"},
		{fmt.Errorf("server git: initialize: %w", &net.DNSError{Err: "no such host", Name: "git.internal"}), "dns lookup failed"},
		{fmt.Errorf("server git: start /opt/git-mcp: %w", &exec.Error{Name: "/opt/git-mcp", Err: exec.ErrNotFound}), "start failed"},
		{fmt.Errorf("server git: start /opt/git-mcp: %w", &fs.PathError{Op: "fork/exec", Path: "/opt/git-mcp", Err: syscall.ENOENT}), "start failed"},
		{errors.New("server git: initialize: request failed with status 503: " + secret), "http 5xx"},
		{errors.New("server git: tools/list: request failed with status 404: " + secret), "http 4xx"},
		{fmt.Errorf("server git: initialize: %w", transport.ErrUnauthorized), "http 401"},
		{errors.New("server git: initialize: " + secret), "error"},
		{errors.New(secret), "error"},
	} {
		got := Reason(c.err)
		if got != c.want {
			t.Errorf("Reason(%v) = %q, want %q", c.err, got, c.want)
		}
		if strings.Contains(got, secret) {
			t.Errorf("Reason(%v) passes on the remote text", c.err)
		}
	}
}
