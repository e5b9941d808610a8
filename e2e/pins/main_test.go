// Package pins checks tool and prompt pinning in the real mcpmux binary:
// enforce and warn modes, approval, pin files and their upgrade.
package pins

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
