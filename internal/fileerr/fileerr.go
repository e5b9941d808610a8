// Package fileerr is the shape of mcpmux's errors about the files it reads:
// each problem names its file and line, and a file's problems travel
// together.
package fileerr

import (
	"strconv"
	"strings"
)

// Error is one problem in a file, located by line.
type Error struct {
	File string // the file name as the caller gave it
	Line int    // 1-based; 0 if unknown
	Msg  string // one line, no file or line prefix
}

// Error returns "FILE:LINE: message", or "FILE: message" without a line.
func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Errors is every problem found in one file.
type Errors []*Error

// Error returns the problems one per line.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}
