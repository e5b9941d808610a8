// Package admin owns what operators see of a running mcpmux: its health
// (/healthz), its readiness (/readyz) and its Prometheus metrics (/metrics).
//
// Metrics implements pipeline.Observer, so the mux reports to it as it works;
// Handler serves the three endpoints. mcpmux serve mounts all three on
// [upstream] admin_listen when it is set (and none on the MCP listener),
// otherwise on the MCP listener when that is a loopback address; on any
// other MCP listener only /healthz is served, since agents reach it and
// /readyz and /metrics are for probes and scrapers.
//
// Label values are bounded so that no caller can grow the number of series:
// server labels are the configured aliases, tool labels are names from the
// children's catalogs, and identity labels are the identities that have a
// policy file, every other identity being counted as "other".
package admin

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/pipeline"
	"github.com/mcpmux/mcpmux/mux/publish"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mcpmux/mcpmux/config"
)

const namespace = "mcpmux"

// Label values standing for a value that is absent or outside the bounded
// set.
const (
	// labelNone is the identity label of a call with no identity, and the
	// server label of a call whose name matched no server.
	labelNone = "none"
	// labelOther is the identity label of an identity with no policy file,
	// and the server label of an alias that is not in the config.
	labelOther = "other"
	// labelUnknownTool is the tool label of a name not in the catalog.
	labelUnknownTool = "unknown"
)

// Histogram buckets, in seconds.
var (
	// childBuckets span a child's answer: 1ms (a local in-process lookup)
	// up to 60s (the default call_timeout).
	childBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}
	// overheadBuckets span what the mux adds itself (lookup, policy,
	// schema validation, audit line): 50µs up to 100ms.
	overheadBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1}
)

// phases are the phases a child can be in, each a value of the state label
// of mcpmux_child_state.
var phases = []child.Phase{child.PhaseStarting, child.PhaseReady, child.PhaseRestarting, child.PhaseDown, child.PhaseStopped}

// Metrics holds mcpmux's Prometheus metrics and implements pipeline.Observer.
// Its Observer methods are safe for concurrent use and never block on
// anything but a short, uncontended lock.
type Metrics struct {
	reg        *prometheus.Registry
	identities func() []string
	known      atomic.Pointer[map[string]struct{}] // identities() as a set

	calls        *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	childSeconds *prometheus.HistogramVec
	overheadSecs *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	restarts     *prometheus.CounterVec
	up           *prometheus.GaugeVec
	state        *prometheus.GaugeVec
	reloads      prometheus.Counter
	reloadErrors prometheus.Counter
	generation   prometheus.Gauge
	sessions     *sessionCollector
	ops          *operationMetrics // operations.go
	// servers holds each server's series by alias, replaced whole when the
	// server list gains one (Servers), so that calls read it without a lock.
	servers       atomic.Pointer[map[string]*serverMetrics]
	serversMu     sync.Mutex // serialises Servers
	configReloads *prometheus.CounterVec
	// callCounters caches calls' series by callKey, so that a call takes
	// no lock of the vector's (its lookup is a read-locked map shared by
	// every call): sync.Map reads a key it holds without locking.
	callCounters sync.Map

	// otherServer stands for every alias outside the config, which a mux
	// built from the same config never reports; it is made on first use.
	otherOnce   sync.Once
	otherServer *serverMetrics
}

// serverMetrics are one server's label-resolved metrics, so that the call
// path does no label hashing for them.
type serverMetrics struct {
	alias    string
	child    prometheus.Observer
	overhead prometheus.Observer
	inFlight prometheus.Gauge
	restarts prometheus.Counter

	// phase changes are serialized so that exactly one state is 1.
	mu    sync.Mutex
	phase child.Phase
	up    prometheus.Gauge
	state map[child.Phase]prometheus.Gauge // grows under mu for an unforeseen phase
	vec   *prometheus.GaugeVec
}

// NewMetrics creates mcpmux's metrics in a registry of their own, together
// with the Go runtime and process collectors. Every server of cfg starts in
// phase "starting". identities returns the identities that currently have a
// policy file (policy.Store.Current().Identities); it is called now, on
// every PolicyReloaded and on every scrape, never on the call path. It may
// be nil, in which case every identity is labelled "other". cfg may be nil
// for a mux with no servers.
func NewMetrics(cfg *config.Config, identities func() []string) *Metrics {
	m := &Metrics{
		reg:        prometheus.NewRegistry(),
		identities: identities,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "calls_total",
			Help: "Tool calls received, by identity (\"other\": no policy file, \"none\": no identity), " +
				"exposed tool (\"unknown\": not in the catalog), server, policy decision and outcome.",
		}, []string{"identity", "tool", "server", "decision", "outcome"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "rate_limited_total",
			Help: "Tool calls refused because their identity was over its rate limit ([limits] rate_limit), " +
				"by identity (\"other\": no policy file, \"none\": no identity).",
		}, []string{"identity"}),
		childSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "call_duration_seconds",
			Help:      "Time allowed tool calls spent waiting on the child server, retries included.",
			Buckets:   childBuckets,
		}, []string{"server"}),
		overheadSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace,
			Name:      "call_overhead_seconds",
			Help:      "Time allowed tool calls spent in mcpmux itself, outside the child server.",
			Buckets:   overheadBuckets,
		}, []string{"server"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "calls_in_flight",
			Help:      "Tool calls currently forwarded to a child server.",
		}, []string{"server"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "child_restarts_total",
			Help:      "Times a child server's process or session went away and was started again.",
		}, []string{"server"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "child_up",
			Help:      "Whether the child server is ready (1) or not (0).",
		}, []string{"server"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "child_state",
			Help:      "The child server's current phase: 1 for the state it is in, 0 for the others.",
		}, []string{"server", "state"}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "policy_reloads_total",
			Help:      "Reloads of the policy directory.",
		}),
		reloadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "policy_reload_errors_total",
			Help:      "Reloads of the policy directory that found a problem (an unreadable directory or a broken policy file).",
		}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace,
			Name:      "policy_generation",
			Help:      "Generation of the policies in force; it grows by one with every change that takes effect.",
		}),
		configReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace,
			Name:      "config_reloads_total",
			Help:      "Reloads of the config file, by result: applied (ok), refused for its problems (error), or nothing to change (unchanged).",
		}, []string{"result"}),
	}
	m.servers.Store(&map[string]*serverMetrics{})
	m.ops = newOperationMetrics()
	m.sessions = &sessionCollector{
		desc: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "sessions"),
			"Open upstream sessions, by identity (\"other\": no policy file, \"none\": no identity).",
			[]string{"identity"}, nil),
		open:  make(map[string]int),
		label: m.identityLabel,
		known: m.knownIdentities,
	}
	m.refreshIdentities()

	if cfg != nil {
		m.Servers(cfg.Servers)
	}

	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.calls, m.rateLimited, m.childSeconds, m.overheadSecs, m.inFlight, m.restarts,
		m.up, m.state, m.reloads, m.reloadErrors, m.generation, m.sessions, m.configReloads, m.ops.server, m.ops.client,
	)
	return m
}

var _ pipeline.Observer = (*Metrics)(nil)

// Pins has the metrics of tool and prompt pinning read from status at
// each scrape: mcpmux_pins{state} (pinned, new, changed, held, gone,
// in_memory) and mcpmux_pin_changes_total, the definitions seen differing
// from their pins (or held as new), each once. Call it once, before
// serving.
func (m *Metrics) Pins(status func() publish.PinCounts) {
	m.reg.MustRegister(&pinCollector{
		status: status,
		pins: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "pins"),
			"Tools and prompts by pinning state at the last catalog build: pinned (equal to their pins), new, changed, held (left out until approved), gone, in_memory (pins the pin file could not take).",
			[]string{"state"}, nil),
		changes: prometheus.NewDesc(prometheus.BuildFQName(namespace, "", "pin_changes_total"),
			"Tool and prompt definitions seen differing from their pins, or held as new, each distinct definition once.",
			nil, nil),
	})
}

// pinCollector is the pinning metrics, from one status read per scrape.
type pinCollector struct {
	status        func() publish.PinCounts
	pins, changes *prometheus.Desc
}

func (c *pinCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pins
	ch <- c.changes
}

func (c *pinCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	for _, g := range []struct {
		state string
		n     int
	}{{"pinned", st.Pinned}, {"new", st.New}, {"changed", st.Changed}, {"held", st.Held}, {"gone", st.Gone}, {"in_memory", st.InMemory}} {
		ch <- prometheus.MustNewConstMetric(c.pins, prometheus.GaugeValue, float64(g.n), g.state)
	}
	ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(st.Changes))
}

// Registry returns the registry holding every metric, for /metrics or for
// registering more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Servers gives every server of list that has no series yet its own, in
// the starting state; a server taken out of the list keeps its series,
// which its last phase (stopped) marks.
func (m *Metrics) Servers(list []config.Server) {
	m.serversMu.Lock()
	defer m.serversMu.Unlock()
	cur := *m.servers.Load()
	next := make(map[string]*serverMetrics, len(cur)+len(list))
	maps.Copy(next, cur)
	for _, s := range list {
		if _, ok := next[s.Alias]; ok {
			continue
		}
		sm := m.newServer(s.Alias)
		sm.setPhase(child.PhaseStarting)
		next[s.Alias] = sm
	}
	m.servers.Store(&next)
}

// ConfigReloaded counts one reload of the config file by its result:
// "ok", "error" or "unchanged".
func (m *Metrics) ConfigReloaded(result string) { m.configReloads.WithLabelValues(result).Inc() }

// PolicyReloaded records one reload of the policy directory: err is the
// problem it found (policy.Store.LastError after the reload, or the error
// the reload itself returned), nil for a clean one. It also re-reads the
// identities that have a policy file.
func (m *Metrics) PolicyReloaded(err error) {
	m.reloads.Inc()
	if err != nil {
		m.reloadErrors.Inc()
	}
	m.refreshIdentities()
}

// setGeneration sets mcpmux_policy_generation.
func (m *Metrics) setGeneration(gen uint64) { m.generation.Set(float64(gen)) }

// refreshIdentities re-reads identities() into the set that labels use.
func (m *Metrics) refreshIdentities() {
	set := make(map[string]struct{})
	if m.identities != nil {
		for _, id := range m.identities() {
			set[id] = struct{}{}
		}
	}
	m.known.Store(&set)
}

// knownIdentities returns the identities that have a policy file, sorted.
func (m *Metrics) knownIdentities() []string {
	return slices.Sorted(maps.Keys(*m.known.Load()))
}

// identityLabel bounds identity to the identities with a policy file.
func (m *Metrics) identityLabel(identity string) string {
	if identity == "" {
		return labelNone
	}
	if _, ok := (*m.known.Load())[identity]; ok {
		return identity
	}
	return labelOther
}

// server returns alias's metrics; an alias outside the config shares the
// "other" server's, created on first use.
func (m *Metrics) server(alias string) *serverMetrics {
	if sm, ok := (*m.servers.Load())[alias]; ok {
		return sm
	}
	return m.other()
}

func (m *Metrics) other() *serverMetrics {
	m.otherOnce.Do(func() { m.otherServer = m.newServer(labelOther) })
	return m.otherServer
}

func (m *Metrics) newServer(label string) *serverMetrics {
	sm := &serverMetrics{
		alias:    label,
		child:    m.childSeconds.WithLabelValues(label),
		overhead: m.overheadSecs.WithLabelValues(label),
		inFlight: m.inFlight.WithLabelValues(label),
		restarts: m.restarts.WithLabelValues(label),
		up:       m.up.WithLabelValues(label),
		state:    make(map[child.Phase]prometheus.Gauge, len(phases)),
		vec:      m.state,
	}
	for _, p := range phases {
		sm.state[p] = m.state.WithLabelValues(label, string(p))
	}
	return sm
}

// setPhase makes phase the child's one current state.
func (sm *serverMetrics) setPhase(phase child.Phase) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	g, ok := sm.state[phase]
	if !ok {
		g = sm.vec.WithLabelValues(sm.alias, string(phase))
		sm.state[phase] = g
	}
	for p, og := range sm.state {
		if p != phase {
			og.Set(0)
		}
	}
	g.Set(1)
	sm.phase = phase
	if phase == child.PhaseReady {
		sm.up.Set(1)
	} else {
		sm.up.Set(0)
	}
}

// CallStarted implements pipeline.Observer.
func (m *Metrics) CallStarted(server string) { m.server(server).inFlight.Inc() }

// CallFinished implements pipeline.Observer.
func (m *Metrics) CallFinished(server string) { m.server(server).inFlight.Dec() }

// CallDone implements pipeline.Observer.
func (m *Metrics) CallDone(rec pipeline.CallRecord) {
	tool := rec.Tool
	if tool == "" {
		tool = labelUnknownTool
	}
	server := labelNone
	var sm *serverMetrics
	if rec.Server != "" {
		sm = m.server(rec.Server)
		server = sm.alias
	}
	identity := m.identityLabel(rec.Identity)
	m.callCounter(callKey{identity, tool, server, rec.Decision, rec.Outcome}).Inc()
	switch rec.Outcome {
	case pipeline.OutcomeRateLimited:
		m.rateLimited.WithLabelValues(identity).Inc()
		return
	case pipeline.OutcomeBusy:
		// Refused before it reached the child: no durations to record.
		return
	}
	if rec.Decision != pipeline.DecisionAllowed || sm == nil {
		return
	}
	sm.child.Observe(rec.Child.Seconds())
	sm.overhead.Observe(max(rec.Total-rec.Child, time.Duration(0)).Seconds())
}

// callKey is the labels of one series of mcpmux_calls_total.
type callKey struct {
	identity, tool, server string
	decision               pipeline.Decision
	outcome                pipeline.Outcome
}

// callCounter returns the series of k, resolved once. Series are never
// deleted, so a cached one stays the vector's.
func (m *Metrics) callCounter(k callKey) prometheus.Counter {
	if c, ok := m.callCounters.Load(k); ok {
		return c.(prometheus.Counter)
	}
	c := m.calls.WithLabelValues(k.identity, k.tool, k.server, string(k.decision), string(k.outcome))
	m.callCounters.Store(k, c)
	return c
}

// ChildPhase implements pipeline.Observer.
func (m *Metrics) ChildPhase(alias string, phase child.Phase) { m.server(alias).setPhase(phase) }

// ChildRestarted implements pipeline.Observer.
func (m *Metrics) ChildRestarted(alias string) { m.server(alias).restarts.Inc() }

// Session implements pipeline.Observer.
func (m *Metrics) Session(identity string, delta int) { m.sessions.add(identity, delta) }

// sessionCollector exposes mcpmux_sessions. It counts sessions by the
// identity itself and applies the label bound when scraped, so that a
// session opened while its identity had a policy file and closed after it
// lost it is still taken off the series it was added to.
type sessionCollector struct {
	desc  *prometheus.Desc
	label func(string) string
	known func() []string

	mu   sync.Mutex
	open map[string]int // identity -> open sessions; no zero entries
}

func (c *sessionCollector) add(identity string, delta int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.open[identity] + delta
	if n == 0 {
		delete(c.open, identity)
	} else {
		c.open[identity] = n
	}
}

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect reports every identity with a policy file (0 when it has no
// session) and "other" and "none" when they have sessions.
func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	byLabel := make(map[string]int)
	for _, id := range c.known() {
		byLabel[id] = 0
	}
	c.mu.Lock()
	for id, n := range c.open {
		byLabel[c.label(id)] += n
	}
	c.mu.Unlock()
	for label, n := range byLabel {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), label)
	}
}
