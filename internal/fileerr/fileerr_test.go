package fileerr

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorNamesFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  *Error
		want string
	}{
		{"line", &Error{File: "mcpmux.toml", Line: 12, Msg: "unknown key \"foo\""}, `mcpmux.toml:12: unknown key "foo"`},
		{"no line", &Error{File: "policies/alice.toml", Msg: "cannot read it"}, "policies/alice.toml: cannot read it"},
		{"absolute path", &Error{File: "/etc/mcpmux/pins.json", Line: 1, Msg: "not JSON"}, "/etc/mcpmux/pins.json:1: not JSON"},
		{"empty message", &Error{File: "f", Line: 3}, "f:3: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestErrorsOnePerLine(t *testing.T) {
	a := &Error{File: "c.toml", Line: 2, Msg: "first"}
	b := &Error{File: "c.toml", Msg: "second"}
	c := &Error{File: "c.toml", Line: 40, Msg: "third"}
	for _, tc := range []struct {
		name string
		errs Errors
		want string
	}{
		{"none", nil, ""},
		{"one", Errors{a}, "c.toml:2: first"},
		{"in order", Errors{a, b, c}, "c.toml:2: first\nc.toml: second\nc.toml:40: third"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.errs.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestErrorsUnwrap: each problem of a file can be found with errors.Is and
// errors.As, also through a wrapping error.
func TestErrorsUnwrap(t *testing.T) {
	a := &Error{File: "c.toml", Line: 2, Msg: "first"}
	b := &Error{File: "c.toml", Line: 9, Msg: "second"}
	es := Errors{a, b}
	wrapped := fmt.Errorf("load: %w", es)
	for _, err := range []error{es, wrapped} {
		if !errors.Is(err, a) || !errors.Is(err, b) {
			t.Errorf("errors.Is(%q, each problem) is false", err)
		}
		if errors.Is(err, &Error{File: "c.toml", Line: 2, Msg: "first"}) {
			t.Errorf("errors.Is(%q) matches an equal problem that is not one of its own", err)
		}
		var e *Error
		if !errors.As(err, &e) || e != a {
			t.Errorf("errors.As(%q) = %v, want the first problem", err, e)
		}
		var all Errors
		if !errors.As(err, &all) || len(all) != 2 {
			t.Errorf("errors.As(%q, *Errors) = %v", err, all)
		}
	}
	if got := es.Unwrap(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Unwrap() = %v, want the problems in order", got)
	}
	if got := (Errors{}).Unwrap(); len(got) != 0 {
		t.Errorf("Unwrap() of no problems = %v", got)
	}
}
