// Package hostile runs the real mcpmux binary against hostile children
// (internal/hostile): broken catalogs, floods, garbage, wrong ids, oversize
// lines, answers twice, exits mid-call.
package hostile

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
