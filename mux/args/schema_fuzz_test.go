package args

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzSchema takes a fuzzed inputSchema through the checks a child's tool
// gets (ObjectSchema, then NewChecker with the default limits) and, when
// the schema is accepted, fuzzed arguments through the checks a call gets.
// Whatever either holds, each step returns; a refusal of the arguments is
// always an invalid-arguments error, which the caller is shown.
func FuzzSchema(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`), []byte(`{"a":"x"}`))
	lim := testLimits
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		if len(schema) > 2*int(lim.MaxSchemaBytes) || len(args) > 1<<20 {
			return // beyond the size limits, which have their own tests
		}
		in, err := ObjectSchema(schema)
		if err != nil {
			return
		}
		a, err := NewChecker(in, lim)
		if err != nil {
			return
		}
		m, _, levels, err := Object(json.RawMessage(args))
		if err == nil {
			err = a.Check(m, levels)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("arguments %q refused with %v, not as invalid arguments", args, err)
		}
	})
}
