// Package remote checks remote (streamable HTTP and SSE) children of the
// real mcpmux binary: listing and calls, retries and kills, pings,
// catalogs re-read, timeouts, tokens, redirects and HTTP errors.
package remote

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
