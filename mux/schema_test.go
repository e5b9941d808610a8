package mux

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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
			s, err := newArgChecker([]byte(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			var args map[string]any
			if err := json.Unmarshal([]byte(c.args), &args); err != nil {
				t.Fatal(err)
			}
			err = s.check(args)
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
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	for _, schema := range []string{
		`{"$ref":"` + srv.URL + `/schema.json"}`,
		`{"type":"object","properties":{"a":{"$ref":"` + srv.URL + `/a.json"}}}`,
		`{"$ref":"#/$defs/missing"}`,
	} {
		if _, err := newArgChecker([]byte(schema)); err == nil {
			t.Errorf("schema with an unresolvable $ref compiled: %s", schema)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("compiling schemas fetched %d remote $refs", n)
	}
	ok := `{"$defs":{"q":{"type":"string"}},"type":"object","properties":{"query":{"$ref":"#/$defs/q"}}}`
	if _, err := newArgChecker([]byte(ok)); err != nil {
		t.Errorf("local $ref refused: %v", err)
	}
}

// Two tools whose schemas share an $id each keep their own schema.
func TestSharedIDKeepsEachSchema(t *testing.T) {
	a, err := newArgChecker([]byte(`{"$id":"urn:x","type":"object","properties":{"n":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := newArgChecker([]byte(`{"$id":"urn:x","type":"object","properties":{"n":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.check(map[string]any{"n": "x"}) != nil || b.check(map[string]any{"n": 5.0}) != nil {
		t.Fatal("a schema was checked against the other's")
	}
}

// Schemas whose validation writes into the compiled schema are safe to use
// from many calls at once (run with -race).
func TestConcurrentValidation(t *testing.T) {
	c, err := newArgChecker([]byte(`{"type":"object","patternProperties":{"^x_":{"type":"string","pattern":"^[a-z]+$"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			args := map[string]any{fmt.Sprintf("x_%d", i): "abc"}
			if err := c.check(args); err != nil {
				t.Errorf("check: %v", err)
			}
		})
	}
	wg.Wait()
}

func TestObjectSchema(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, `{"type":"object","properties":{"a":{"type":"string"}}}`, false},
		{`{}`, `{"type":"object"}`, false},
		{` { "properties":{"a":{}}}`, `{"type":"object","properties":{"a":{}}}`, false},
		{`{"type":"string"}`, "", true},
		{`true`, "", true},
		{`{"type":"object","properties":{"a":true}}`, "", true},
		{`{"type":null}`, "", true},
		{`{"Type":"object"}`, `{"type":"object","Type":"object"}`, false},
		{`{"type":"object","properties":[]}`, "", true},
	}
	for _, c := range cases {
		got, err := objectSchema(json.RawMessage(c.in))
		if (err != nil) != c.bad {
			t.Errorf("objectSchema(%s) error = %v", c.in, err)
			continue
		}
		if !c.bad && string(got) != c.want {
			t.Errorf("objectSchema(%s) = %s, want %s", c.in, got, c.want)
		}
		if !c.bad && !json.Valid(got) {
			t.Errorf("objectSchema(%s) = %s: not JSON", c.in, got)
		}
	}
}
