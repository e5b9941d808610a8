// Package liblog routes what the libraries inside mcpmux log into
// mcpmux's zerolog logger. They log through log/slog (mcp-go's transports)
// or the standard log package (mcp-go's stdio server, net/http's servers);
// their lines go into mcpmux's logger, in its format, so that stderr is one
// log in one format.
package liblog

import (
	stdlog "log"
	"log/slog"

	"github.com/rs/zerolog"
)

// Slog returns a slog.Logger whose records are logged by log, at
// their own levels.
func Slog(log zerolog.Logger) *slog.Logger {
	return slog.New(zerolog.NewSlogHandler(log))
}

// Std returns a standard library logger whose every line is logged
// by log at level.
func Std(log zerolog.Logger, level slog.Level) *stdlog.Logger {
	return slog.NewLogLogger(zerolog.NewSlogHandler(log), level)
}

// RouteDefaults makes log the logger of whatever logs through
// slog.Default or the standard log package's default logger (mcp-go's
// stdio client transport takes slog.Default, and has no option to take
// another). Lines of the standard logger are logged at level error: the
// libraries use it for failures.
func RouteDefaults(log zerolog.Logger) {
	slog.SetDefault(Slog(log))
	// After slog.SetDefault, the standard logger writes into slog at level
	// info; its lines are failures.
	std := Std(log, slog.LevelError)
	stdlog.SetFlags(0)
	stdlog.SetPrefix("")
	stdlog.SetOutput(std.Writer())
}
