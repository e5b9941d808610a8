package admin

import (
	"testing"

	"github.com/mcpmux/mcpmux/mux/pipeline"
)

// BenchmarkCallDone is the metrics' share of one allowed call, from
// parallel callers.
func BenchmarkCallDone(b *testing.B) {
	m := NewMetrics(nil, func() []string { return []string{"alice"} })
	rec := pipeline.CallRecord{Identity: "alice", Tool: "docs__search", Server: "docs", Decision: pipeline.DecisionAllowed, Outcome: pipeline.OutcomeOK}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.CallDone(rec)
		}
	})
}
