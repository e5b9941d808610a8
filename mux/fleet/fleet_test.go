package fleet

import (
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/config"
)

// Which changes of a server's entry keep its child (re-exposed) and which
// start it anew.
func TestStartsAlike(t *testing.T) {
	base := config.Server{Alias: "docs", Command: "/bin/docs", Args: []string{"-v"}, Env: map[string]string{"A": "1"},
		Prefix: true, Required: true, StartupTimeout: time.Second, MaxInFlight: 4, MaxQueued: 8}
	for _, c := range []struct {
		name   string
		change func(*config.Server)
		alike  bool
	}{
		{"hide", func(s *config.Server) { s.Hide = []string{"x"} }, true},
		{"read_only", func(s *config.Server) { s.ReadOnly = []string{"x"} }, true},
		{"trust_annotations", func(s *config.Server) { s.TrustAnnotations = true }, true},
		{"prefix", func(s *config.Server) { s.Prefix = false }, true},
		{"roots", func(s *config.Server) { s.Roots = []string{"file:///tmp"} }, true},
		{"required", func(s *config.Server) { s.Required = false }, true},
		{"max_in_flight", func(s *config.Server) { s.MaxInFlight = 1 }, true},
		{"max_queued", func(s *config.Server) { s.MaxQueued = 1 }, true},
		{"replace", func(s *config.Server) { s.Replace = config.ReplaceStopFirst }, true},
		{"command", func(s *config.Server) { s.Command = "/bin/other" }, false},
		{"args", func(s *config.Server) { s.Args = nil }, false},
		{"env", func(s *config.Server) { s.Env = map[string]string{"A": "2"} }, false},
		{"inherit_env", func(s *config.Server) { s.InheritEnv = []string{"HOME"} }, false},
		{"url", func(s *config.Server) { s.Command, s.URL = "", "http://x/mcp" }, false},
		{"headers", func(s *config.Server) { s.Headers = map[string]string{"X": "1"} }, false},
		{"user", func(s *config.Server) { s.User = "nobody" }, false},
		{"group", func(s *config.Server) { s.Group = "nogroup" }, false},
		{"startup_timeout", func(s *config.Server) { s.StartupTimeout = time.Minute }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := base
			next.Env = map[string]string{"A": "1"}
			c.change(&next)
			if got := startsAlike(base, next); got != c.alike {
				t.Errorf("startsAlike after a change of %s = %v, want %v", c.name, got, c.alike)
			}
		})
	}
}
