package main

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
)

// logOutput is where mcpmux's logger writes: it keeps the lines at or above
// the level in force and writes them in the format in force, both of which
// a reload of the config changes (Set) without a new logger. The logger
// itself logs every level; the few debug lines mcpmux has are off the call
// path.
type logOutput struct {
	level   atomic.Int32 // a zerolog.Level
	console atomic.Bool
	json    io.Writer
	pretty  zerolog.ConsoleWriter
}

func newLogOutput(m config.Mux, w io.Writer) *logOutput {
	o := &logOutput{json: w, pretty: zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}}
	o.Set(m)
	return o
}

// Set puts the log_level and log_format of m in force for the lines
// written from now on.
func (o *logOutput) Set(m config.Mux) {
	o.level.Store(int32(levelOf(m)))
	o.console.Store(m.LogFormat == "console")
}

// Widen puts in force the more verbose of the levels of old and next, and
// next's format: the lines of a reload from old to next are written as
// either version would write them.
func (o *logOutput) Widen(old, next config.Mux) {
	o.Set(next)
	o.level.Store(int32(min(levelOf(old), levelOf(next))))
}

// levelOf is m's log_level; one the config did not validate is info.
func levelOf(m config.Mux) zerolog.Level {
	level, err := zerolog.ParseLevel(m.LogLevel)
	if err != nil {
		return zerolog.InfoLevel
	}
	return level
}

func (o *logOutput) Write(p []byte) (int, error) { return o.WriteLevel(zerolog.NoLevel, p) }

// WriteLevel writes p, a line at level, unless the level in force is above
// it. A line of no level (zerolog's Log) is written unless logging is off.
func (o *logOutput) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	floor := zerolog.Level(o.level.Load())
	if floor == zerolog.Disabled || level != zerolog.NoLevel && level < floor {
		return len(p), nil
	}
	if o.console.Load() {
		return o.pretty.Write(p)
	}
	return o.json.Write(p)
}
