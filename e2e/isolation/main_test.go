// Package isolation checks that children of the real mcpmux binary cannot
// read mcpmux or its supervisor, and run as the configured user.
package isolation

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
