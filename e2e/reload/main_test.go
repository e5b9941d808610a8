// Package reload checks the live reload of policy files and rules in the
// real mcpmux binary: grants, revocations, broken and deleted files,
// in-place writes, ConfigMap swaps, calls in flight, CEL rules.
package reload

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
