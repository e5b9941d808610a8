// Package http drives the real mcpmux binary's streamable HTTP upstream:
// identities and authentication (tokens, JWTs, JWKS files and identity
// providers), list_changed, health, readiness, metrics, admin and debug
// listeners, draining, exposure, protocol eras, idle sessions.
package http

import (
	"testing"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.Main(m) }
