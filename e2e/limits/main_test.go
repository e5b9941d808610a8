// Package limits checks the real mcpmux binary's limits on what clients
// and remote children send: HTTP bodies, headers, slow and trickled
// requests, write timeouts, session limits, and max_message_bytes.
package limits

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
