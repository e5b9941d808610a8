package mux

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzSchema takes a fuzzed inputSchema through the checks a child's tool
// gets (objectSchema, then newArgChecker with the default limits) and, when
// the schema is accepted, fuzzed arguments through the checks a call gets.
// Whatever either holds, each step returns; a refusal of the arguments is
// always an invalid-arguments error, which the caller is shown.
func FuzzSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), []byte(`{"a":"x"}`))
	lim := unstartedMux(f, "").cfg.Limits
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		if len(schema) > 2*int(lim.MaxSchemaBytes) || len(args) > 1<<20 {
			return // beyond the size limits, which have their own tests
		}
		in, err := objectSchema(schema)
		if err != nil {
			return
		}
		a, err := newArgChecker(in, lim)
		if err != nil {
			return
		}
		m, _, levels, err := argumentsObject(json.RawMessage(args))
		if err == nil {
			err = a.check(m, levels)
		}
		if err != nil && !errors.Is(err, errInvalidArguments) {
			t.Fatalf("arguments %q refused with %v, not as invalid arguments", args, err)
		}
	})
}
