// Package cli runs the real mcpmux binary's commands (validate, tools,
// call, pins, rules, version, help, serve) as a user would, and checks the
// shipped deploy configs validate.
package cli

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
