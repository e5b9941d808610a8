// Package replicaload puts 16 callers of both protocol eras through
// HAProxy in front of 3 mcpmux replicas while replicas are SIGKILLed
// (TestKillUnderLoad) or replaced one by one with SIGTERM
// (TestRollingUpdateUnderLoad), and judges every call from the children's
// own records, as the chaos soak does: no answer crosses, no write runs
// twice, every call is answered, and only calls in flight on a replica
// that was killed fail.
package replicaload

import (
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { ts.Main(m) }
