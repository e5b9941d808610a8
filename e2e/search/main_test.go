// Package search drives search mode through the real mcpmux binary:
// find_tools and call_tool over real children, under policies on disk.
package search

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
