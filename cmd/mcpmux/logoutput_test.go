package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
)

// The level and the format of the log change under a logger that is made
// once, as a reload changes them.
func TestLogOutput(t *testing.T) {
	var buf bytes.Buffer
	out := newLogOutput(config.Mux{LogLevel: "info", LogFormat: "json"}, &buf)
	log := zerolog.New(out).Level(zerolog.TraceLevel)
	lines := func() []string {
		defer buf.Reset()
		return strings.Split(strings.TrimSpace(buf.String()), "\n")
	}
	log.Debug().Msg("d1")
	log.Info().Msg("i1")
	if got := lines(); len(got) != 1 || got[0] != `{"level":"info","message":"i1"}` {
		t.Errorf("at info: %q", got)
	}
	out.Set(config.Mux{LogLevel: "debug", LogFormat: "console"})
	log.Debug().Msg("d2")
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "DBG") || !strings.Contains(got[0], "d2") || strings.HasPrefix(got[0], "{") {
		t.Errorf("at debug, console: %q", got)
	}
	out.Widen(config.Mux{LogLevel: "debug"}, config.Mux{LogLevel: "error", LogFormat: "json"})
	log.Debug().Msg("d3")
	if got := lines(); len(got) != 1 || got[0] != `{"level":"debug","message":"d3"}` {
		t.Errorf("widened from debug to error: %q", got)
	}
	out.Set(config.Mux{LogLevel: "error", LogFormat: "json"})
	log.Warn().Msg("w4")
	log.Error().Msg("e4")
	if got := lines(); len(got) != 1 || got[0] != `{"level":"error","message":"e4"}` {
		t.Errorf("at error: %q", got)
	}
	out.Set(config.Mux{LogLevel: "disabled", LogFormat: "json"})
	log.Error().Msg("e5")
	log.Log().Msg("n5")
	if buf.Len() != 0 {
		t.Errorf("disabled: %q", buf.String())
	}
}
