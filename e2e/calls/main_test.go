// Package calls drives the real mcpmux binary over stdio with a real MCP
// client and real labserver children: calls, timeouts and cancellation,
// children that crash, restart or cannot start, orphans and signals, the
// handshake and instructions, the seed document and request ids.
package calls

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
