package args

import (
	"testing"
)

// The validator-free path for flat schemas gives every call the answer the
// validator gives it: for each schema and arguments, Check (which takes the
// flat path where it can) and the compiled schema agree, and the flat path
// is taken for the schemas it is meant for.
func TestFlatSchemaAgreesWithValidator(t *testing.T) {
	cases := []struct {
		schema string
		flat   bool
		args   []string
	}{
		{`{"type":"object","properties":{"text":{"type":"string","description":"What to answer."}}}`, true,
			[]string{`{}`, `{"text":"hi"}`, `{"text":1}`, `{"text":null}`, `{"other":[1]}`}},
		{`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"number"},"exact":{"type":"boolean"}},"required":["query"]}`, true,
			[]string{`{"query":"q"}`, `{"query":"q","limit":2.5,"exact":true}`, `{"limit":1}`, `{"query":"q","exact":"yes"}`, `{"query":null}`}},
		{`{"type":"object","properties":{"n":{"type":"integer"},"o":{"type":"object"},"a":{"type":"array"},"z":{"type":"null"},"any":{"title":"x"}},"additionalProperties":false}`, true,
			[]string{`{"n":1}`, `{"n":1.5}`, `{"n":1e3}`, `{"n":-0}`, `{"o":{"x":1}}`, `{"o":[]}`, `{"a":[1]}`, `{"a":{}}`, `{"z":null}`, `{"z":0}`, `{"any":[{}]}`, `{"extra":1}`}},
		{`{"type":"object","additionalProperties":true,"required":["a","b"]}`, true,
			[]string{`{"a":1,"b":2}`, `{"a":1}`}},
		// Not flat: the validator alone judges them.
		{`{"type":"object","properties":{"s":{"type":"string","minLength":2}}}`, false, []string{`{"s":"a"}`, `{"s":"ab"}`}},
		{`{"type":"object","properties":{"s":{"type":["string","null"]}}}`, false, []string{`{"s":null}`, `{"s":1}`}},
		{`{"type":"object","properties":{"s":true}}`, false, []string{`{"s":1}`}},
		{`{"properties":{"s":{"type":"string"}}}`, false, []string{`{"s":1}`}},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, false, []string{`{"s":1}`, `{"s":"x"}`}},
		{`{"type":"object","properties":{"s":{"type":null}}}`, false, []string{`{"s":1}`}},
		{`{"type":"object","required":null,"additionalProperties":null}`, false, []string{`{"s":1}`}},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`, false, []string{`{}`}},
	}
	for _, c := range cases {
		if got := readFlatSchema([]byte(c.schema)) != nil; got != c.flat {
			t.Errorf("%s: read as flat %v, want %v", c.schema, got, c.flat)
		}
		a, err := NewChecker([]byte(c.schema), testLimits)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		compiled, err := a.compile()
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range c.args {
			m, levels, err := Decode([]byte(args))
			if err != nil {
				t.Fatal(err)
			}
			want := validateArgs(compiled, m)
			got := a.Check(m, levels)
			if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
				t.Errorf("%s with %s: Check says %v, the validator %v", c.schema, args, got, want)
			}
		}
	}
}
