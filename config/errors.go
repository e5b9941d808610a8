package config

import (
	"slices"
	"strconv"
	"strings"
)

// Error is one problem in a config file, located by line.
type Error struct {
	File string // the file name as given to Load or Parse
	Line int    // 1-based
	Msg  string // one line, no file or line prefix
}

// Error returns "FILE:LINE: message".
func (e *Error) Error() string {
	return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
}

// Errors is every problem found in one config file, in line order.
// Load and Parse never return an empty Errors.
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

// sorted orders problems by line, keeping the order they were found in
// within a line.
func (es Errors) sorted() Errors {
	slices.SortStableFunc(es, func(a, b *Error) int { return a.Line - b.Line })
	return es
}
