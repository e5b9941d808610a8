// Package fidelity checks that what passes through the real mcpmux binary
// (prompts, resources, subscriptions, completion, list_changed, errors,
// sampling and elicitation rounds) reaches the client as the child sent it,
// over stdio and HTTP.
package fidelity

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
