package admin

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpmux/mcpmux/mux/pipeline"
)

// Calls refused by the rate limit are counted per identity, and so are
// they and busy refusals in calls_total, without durations.
func TestLimitRefusalsCounted(t *testing.T) {
	m := NewMetrics(nil, func() []string { return []string{"alice"} })
	for _, rec := range []pipeline.CallRecord{
		{Identity: "alice", Tool: "docs__search", Server: "docs", Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeRateLimited},
		{Identity: "alice", Tool: "docs__search", Server: "docs", Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeRateLimited},
		{Identity: "mallory", Tool: "docs__search", Server: "docs", Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeRateLimited},
		{Identity: "alice", Tool: "docs__search", Server: "docs", Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeBusy},
	} {
		m.CallDone(rec)
	}
	for identity, want := range map[string]float64{"alice": 2, "other": 1} {
		if got := testutil.ToFloat64(m.rateLimited.WithLabelValues(identity)); got != want {
			t.Errorf("rate_limited_total{identity=%q} = %v, want %v", identity, got, want)
		}
	}
	if got := testutil.ToFloat64(m.calls.WithLabelValues("alice", "docs__search", labelOther, "allowed", "busy")); got != 1 {
		t.Errorf("busy calls counted %v times, want 1", got)
	}
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "mcpmux_call_duration_seconds" && f.GetName() != "mcpmux_call_overhead_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			if n := s.GetHistogram().GetSampleCount(); n != 0 {
				t.Errorf("%s: refused calls recorded %d durations", f.GetName(), n)
			}
		}
	}
}
