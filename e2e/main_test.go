// Package e2e drives the real mcpmux binary over stdio with a real MCP
// client, with real labserver children, real policy files and real signals.
package e2e

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
