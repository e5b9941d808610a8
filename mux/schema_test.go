package mux

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestValidateArgs(t *testing.T) {
	const search = `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`
	const nested = `{"type":"object","properties":{"page":{"type":"object","properties":{"size":{"type":"integer","minimum":1}},"required":["size"]}}}`
	cases := []struct {
		name   string
		schema string
		args   string
		want   []string // each a line of the message; nil means valid
	}{
		{"valid", search, `{"query":"public"}`, nil},
		{"wrong type", search, `{"query":3}`, []string{"- /query: "}},
		{"missing required: only the required error", search, `{}`, []string{"- (root): Required property 'query' is missing"}},
		{"nested", nested, `{"page":{"size":0}}`, []string{"- /page/size: "}},
		{"nested missing", nested, `{"page":{}}`, []string{"- /page: Required property 'size' is missing"}},
		{"oneOf", `{"type":"object","oneOf":[{"required":["a"]},{"required":["b"]}]}`, `{"a":1,"b":2}`, []string{"- (root): "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := compileSchema(newCompiler(), []byte(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
			err = validateArgs(s, args)
			if c.want == nil {
				if err != nil {
					t.Fatalf("valid arguments refused: %v", err)
				}
				return
			}
			if !errors.Is(err, errInvalidArguments) {
				t.Fatalf("got %v, want invalid arguments", err)
			}
			lines := strings.Split(err.Error(), "\n")[1:]
			if len(lines) != len(c.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(c.want), err)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %q, want prefix %q", lines[i], w)
				}
			}
		})
	}
}

func TestSchemasNeverLeaveTheMachine(t *testing.T) {
	for _, schema := range []string{
		`{"$ref":"https://example.com/schema.json"}`,
		`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/x.json"}}}`,
		`{"$ref":"#/$defs/missing"}`,
	} {
		if _, err := compileSchema(newCompiler(), []byte(schema)); err == nil {
			t.Errorf("schema with an unresolvable $ref compiled: %s", schema)
		}
	}
	ok := `{"$defs":{"q":{"type":"string"}},"type":"object","properties":{"query":{"$ref":"#/$defs/q"}}}`
	if _, err := compileSchema(newCompiler(), []byte(ok)); err != nil {
		t.Errorf("local $ref refused: %v", err)
	}
}
