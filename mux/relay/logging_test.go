package relay

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// Which of a child's log messages reach the client of a call: a
// 2026-07-28 request's those its _meta asked for, a session's those its
// logging/setLevel admits, and a session that set none every defined
// level, as a direct connection would; never an undefined level.
func TestLogWanted(t *testing.T) {
	var sessions upstream.Registry
	quiet, err := sessions.Admit("a")
	if err != nil {
		t.Fatal(err)
	}
	warn, err := sessions.Admit("a")
	if err != nil {
		t.Fatal(err)
	}
	warn.SetLevel(mcp.LoggingLevelWarning)
	modern := func(l mcp.LoggingLevel) *upstream.Attachment {
		return &upstream.Attachment{Proto: frame.Protocol{Modern: true, LogLevel: l}}
	}
	for _, c := range []struct {
		name  string
		to    *upstream.Attachment
		level mcp.LoggingLevel
		want  bool
	}{
		{"modern, asked info, debug", modern(mcp.LoggingLevelInfo), mcp.LoggingLevelDebug, false},
		{"modern, asked info, error", modern(mcp.LoggingLevelInfo), mcp.LoggingLevelError, true},
		{"modern, asked none", modern(""), mcp.LoggingLevelEmergency, false},
		{"session at warning, info", &upstream.Attachment{Sess: warn}, mcp.LoggingLevelInfo, false},
		{"session at warning, warning", &upstream.Attachment{Sess: warn}, mcp.LoggingLevelWarning, true},
		{"session that set none, debug", &upstream.Attachment{Sess: quiet}, mcp.LoggingLevelDebug, true},
		{"session that set none, undefined", &upstream.Attachment{Sess: quiet}, "verbose", false},
		{"no session", &upstream.Attachment{}, mcp.LoggingLevelError, false},
	} {
		if got := logWanted(c.to, c.level); got != c.want {
			t.Errorf("%s: wanted %t, want %t", c.name, got, c.want)
		}
	}
}

// A child's message is logged by mcpmux at the nearest level of its own.
func TestChildLevel(t *testing.T) {
	for level, want := range map[mcp.LoggingLevel]zerolog.Level{
		mcp.LoggingLevelDebug: zerolog.DebugLevel, mcp.LoggingLevelInfo: zerolog.InfoLevel,
		mcp.LoggingLevelNotice: zerolog.InfoLevel, mcp.LoggingLevelWarning: zerolog.WarnLevel,
		mcp.LoggingLevelError: zerolog.ErrorLevel, mcp.LoggingLevelEmergency: zerolog.ErrorLevel,
		"verbose": zerolog.InfoLevel,
	} {
		if got := childLevel(level); got != want {
			t.Errorf("%s: logged at %s, want %s", level, got, want)
		}
	}
}
