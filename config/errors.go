package config

import (
	"slices"

	"github.com/mcpmux/mcpmux/internal/fileerr"
)

// Error is one problem in a config file, located by line.
type Error = fileerr.Error

// Errors is every problem found in one config file, in line order.
// Load and Parse never return an empty Errors.
type Errors = fileerr.Errors

// sortByLine orders problems by line, keeping the order they were found in
// within a line.
func sortByLine(es Errors) Errors {
	slices.SortStableFunc(es, func(a, b *Error) int { return a.Line - b.Line })
	return es
}
