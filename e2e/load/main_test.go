// Package load puts the real mcpmux binary under concurrent and sustained
// calls: the default limits, a busy server, rate limits, and the schema
// limits that leave tools out.
package load

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
