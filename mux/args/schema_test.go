package args

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
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
			s, err := NewChecker([]byte(c.schema), testLimits)
			if err != nil {
				t.Fatal(err)
			}
			err = checkJSON(s, c.args)
			if c.want == nil {
				if err != nil {
					t.Fatalf("valid arguments refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
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
		if _, err := NewChecker([]byte(schema), testLimits); err == nil {
			t.Errorf("schema with an unresolvable $ref compiled: %s", schema)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("compiling schemas fetched %d remote $refs", n)
	}
	ok := `{"$defs":{"q":{"type":"string"}},"type":"object","properties":{"query":{"$ref":"#/$defs/q"}}}`
	if _, err := NewChecker([]byte(ok), testLimits); err != nil {
		t.Errorf("local $ref refused: %v", err)
	}
}

// Two tools whose schemas share an $id each keep their own schema.
func TestSharedIDKeepsEachSchema(t *testing.T) {
	a, err := NewChecker([]byte(`{"$id":"urn:x","type":"object","properties":{"n":{"type":"string"}}}`), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewChecker([]byte(`{"$id":"urn:x","type":"object","properties":{"n":{"type":"integer"}}}`), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if checkJSON(a, `{"n":"x"}`) != nil || checkJSON(b, `{"n":5}`) != nil {
		t.Fatal("a schema was checked against the other's")
	}
}

// writingSchema uses the keywords whose validation writes into a compiled
// jsonschema v0.9.8 schema (patternProperties, pattern), reached through
// $ref and alongside the other keywords a call commonly meets.
const writingSchema = `{
	"type": "object",
	"$defs": {
		"name": {"type": "string", "pattern": "^[a-z]+$"},
		"tag": {"$dynamicAnchor": "tag", "type": "string", "format": "email"}
	},
	"properties": {"id": {"$ref": "#/$defs/name"}, "tags": {"type": "array", "items": {"$dynamicRef": "#tag"}}},
	"patternProperties": {"^x_": {"$ref": "#/$defs/name"}, "^n_": {"type": "integer", "minimum": 0}},
	"unevaluatedProperties": false,
	"required": ["id"]
}`

// Many calls validating against one tool at once, each its own arguments,
// every one valid or invalid as it would be alone (run with -race: the
// library writes into the compiled schema while validating).
func TestConcurrentValidation(t *testing.T) {
	a, err := NewChecker([]byte(writingSchema), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	const calls = 300
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-start
			valid := fmt.Sprintf(`{"id":"abc","x_%d":"def","n_%d":%d,"tags":["a%d@example.com"]}`, i, i, i, i)
			invalid := []struct{ args, path string }{
				{fmt.Sprintf(`{"id":"abc","x_%d":"D%d"}`, i, i), fmt.Sprintf("/x_%d: ", i)},
				{fmt.Sprintf(`{"id":"A%d"}`, i), "/id: "},
				{fmt.Sprintf(`{"id":"abc","n_%d":-%d}`, i, i+1), fmt.Sprintf("/n_%d: ", i)},
				{fmt.Sprintf(`{"id":"abc","y_%d":1}`, i), ""},
			}[i%4]
			if err := checkJSON(a, valid); err != nil {
				t.Errorf("valid %s refused: %v", valid, err)
			}
			err := checkJSON(a, invalid.args)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), invalid.path) {
				t.Errorf("invalid %s: got %v, want a problem at %q", invalid.args, err, invalid.path)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := a.copies.Load(); n < 1 || n > calls {
		t.Errorf("%d copies compiled for %d concurrent calls", n, calls)
	}
}

// A listed tool holds no compiled schema until it is called; one whose
// calls never overlap is then compiled for them once.
func TestSequentialChecksCompileOnce(t *testing.T) {
	a, err := NewChecker([]byte(writingSchema), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if n, s := a.copies.Load(), a.idle.Load(); n != 0 || s != nil {
		t.Fatalf("listed, never called: %d copies compiled, one kept: %v", n, s != nil)
	}
	for i := range 100 {
		if err := checkJSON(a, fmt.Sprintf(`{"id":"abc","x_%d":"def"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.copies.Load(); n != 1 {
		t.Fatalf("%d copies compiled for calls one after another, want 1", n)
	}
}

// With the budget for spare copies spent, concurrent calls still each get
// their own answer, on one more copy they take turns on.
func TestSpareBudgetSpent(t *testing.T) {
	budget := spareSchemaBudget
	spareSchemaBudget = 0
	t.Cleanup(func() { spareSchemaBudget = budget })
	a, err := NewChecker([]byte(writingSchema), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := checkJSON(a, fmt.Sprintf(`{"id":"abc","x_%d":"def"}`, i)); err != nil {
				t.Errorf("valid arguments refused: %v", err)
			}
			if err := checkJSON(a, fmt.Sprintf(`{"id":"abc","x_%d":"D"}`, i)); !errors.Is(err, ErrInvalid) {
				t.Errorf("invalid arguments: got %v", err)
			}
		})
	}
	wg.Wait()
	if n := a.copies.Load(); n > 2 {
		t.Errorf("%d copies compiled with no budget for spares, want at most 2", n)
	}
}

// A call whose validation is as heavy as the work bound allows does not
// hold up a light call to the same tool: the light one is checked while the
// heavy one holds its copy of the schema.
func TestHeavyValidationDoesNotBlockLight(t *testing.T) {
	a, err := NewChecker([]byte(`{"type":"object","additionalProperties":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	heavyArgs := `{"a":[` + strings.TrimSuffix(strings.Repeat(`1,`, maxValidationWork/3-1), ",") + `]}`
	m, levels, err := Decode([]byte(heavyArgs))
	if err != nil {
		t.Fatal(err)
	}
	if w := validationWork(a.perValue, levels); w > maxValidationWork || w < maxValidationWork*9/10 {
		t.Fatalf("heavy arguments take %d evaluations, want just under %d", w, maxValidationWork)
	}
	heavyValidating, release := make(chan struct{}), make(chan struct{})
	var taken atomic.Int32
	a.validating = func() {
		if taken.Add(1) == 1 { // the heavy call
			close(heavyValidating)
			<-release
		}
	}
	heavyDone := make(chan error, 1)
	go func() { heavyDone <- a.Check(m, levels) }()
	<-heavyValidating

	lightDone := make(chan error, 1)
	go func() { lightDone <- checkJSON(a, `{"a":["x",1]}`) }()
	select {
	case err := <-lightDone:
		if err != nil {
			t.Errorf("light call: %v", err)
		}
	case <-time.After(testsupport.Wait):
		t.Error("the light call waited for the heavy one")
	}
	select {
	case <-heavyDone:
		t.Fatal("the heavy call ended before it was let through")
	default:
	}
	close(release)
	if err := <-heavyDone; err != nil {
		t.Fatalf("heavy call: %v", err)
	}
	if n := a.copies.Load(); n != 2 {
		t.Errorf("%d copies compiled, want 2 (one per overlapping call)", n)
	}
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
		got, err := ObjectSchema(json.RawMessage(c.in))
		if (err != nil) != c.bad {
			t.Errorf("ObjectSchema(%s) error = %v", c.in, err)
			continue
		}
		if !c.bad && string(got) != c.want {
			t.Errorf("ObjectSchema(%s) = %s, want %s", c.in, got, c.want)
		}
		if !c.bad && !json.Valid(got) {
			t.Errorf("ObjectSchema(%s) = %s: not JSON", c.in, got)
		}
	}
}

// testLimits are the schema limits of the default config.
var testLimits = config.Limits{MaxSchemaBytes: config.DefaultMaxSchemaBytes, MaxSchemaDepth: config.DefaultMaxSchemaDepth}

// checkJSON checks arguments given as JSON, as a call does.
func checkJSON(a *Checker, args string) error {
	m, levels, err := Decode([]byte(args))
	if err != nil {
		return err
	}
	return a.Check(m, levels)
}

// refChain is a schema whose root goes through n $defs, each applying the
// next one fanout times, before a string schema.
func refChain(n, fanout int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{"$ref":"#/$defs/d%d"},`, i+1), fanout), ",")
		fmt.Fprintf(&b, `"d%d":{"allOf":[%s]},`, i, refs)
	}
	fmt.Fprintf(&b, `"d%d":{"properties":{"q":{"type":"string"}}}}}`, n)
	return b.String()
}

func TestSchemaLimits(t *testing.T) {
	small := config.Limits{MaxSchemaBytes: 256, MaxSchemaDepth: 4}
	cases := []struct {
		name, schema string
		reason       string // "" when the schema is accepted
	}{
		{"fits", `{"type":"object","enum":[[[1]]]}`, ""},
		{"too deep", `{"type":"object","enum":[[[[1]]]]}`, "its inputSchema is nested deeper than max_schema_depth"},
		{"brackets in strings are not nesting", `{"type":"object","description":"[[[[[[{{{{\"[[["}`, ""},
		{"too big", `{"type":"object","description":"` + strings.Repeat("x", 256) + `"}`, "its inputSchema is larger than max_schema_bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewChecker([]byte(c.schema), small)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if got := SchemaRefusal(err); got != c.reason {
				t.Fatalf("refusal %q (%v), want %q", got, err, c.reason)
			}
		})
	}
	if got := SchemaRefusal(errors.New("x")); got != "its inputSchema does not compile" {
		t.Errorf("a compile error is refused as %q", got)
	}
}

// Schemas whose $refs loop, chain deeply or multiply the work compile and
// validate in bounded time, or are refused when a validation could run away.
func TestHostileSchemas(t *testing.T) {
	cases := []struct {
		name, schema string
		refused      string // part of the error; "" when accepted
		args         string // validated when accepted
		invalid      bool
	}{
		{"self reference", `{"$ref":"#"}`, "cycle", "", false},
		{"two defs referring to each other", `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"$ref":"#/$defs/a"}]}}}`, "cycle", "", false},
		{"long chain", refChain(60, 1), "", `{"q":"x"}`, false},
		{"long chain, invalid", refChain(60, 1), "", `{"q":1}`, true},
		{"doubling chain", refChain(40, 2), "schema evaluations", "", false},
		{"recursive tree", `{"type":"object","$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{"left":{"$ref":"#/$defs/node"},"right":{"$ref":"#/$defs/node"},"v":{"type":"integer"}}}}}`,
			"", strings.Repeat(`{"left":`, 100) + `{"v":1}` + strings.Repeat(`,"right":{"v":2}}`, 100), false},
		{"recursion that doubles per level", `{"type":"object","$ref":"#/$defs/node","$defs":{"node":{"allOf":[{"properties":{"c":{"$ref":"#/$defs/node"}}},{"properties":{"c":{"$ref":"#/$defs/node"}}}]}}}`,
			"schema evaluations", "", false},
		{"dynamic ref", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$dynamicAnchor":"n","type":"object","properties":{"c":{"$dynamicRef":"#n"}}}`,
			"", `{"c":{"c":{"c":{}}}}`, false},
		// Go's regexp runs in linear time: no catastrophic backtracking.
		{"backtracking pattern", `{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}`,
			"", `{"s":"` + strings.Repeat("a", 100000) + `!"}`, true},
		{"long pattern", `{"type":"object","properties":{"s":{"type":"string","pattern":"` + strings.Repeat("a", 1025) + `"}}}`,
			"a pattern is 1025 bytes", "", false},
		{"huge enum applied many times", `{"type":"object","additionalProperties":{"anyOf":[` +
			strings.TrimSuffix(strings.Repeat(`{"enum":[`+strings.TrimSuffix(strings.Repeat(`"x",`, 1000), ",")+`]},`, 20), ",") + `]}}`,
			"schema evaluations", "", false},
		// contentSchema is an annotation: the content of a string is not
		// decoded and validated against it.
		{"content schema", `{"type":"object","properties":{"s":{"type":"string","contentMediaType":"application/json","contentSchema":{"type":"object","required":["x"]}}}}`,
			"", `{"s":"{}"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := NewChecker([]byte(c.schema), testLimits)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("got %v, want an error containing %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if err := checkJSON(a, c.args); (err != nil) != c.invalid {
				t.Fatalf("check = %v, want invalid %v", err, c.invalid)
			}
		})
	}
}

// The library itself ends on a schema that refers to itself, so a cycle
// mcpmux refuses could not hang it either.
func TestLibraryEndsOnSelfReference(t *testing.T) {
	s, err := compileSchema(newCompiler(), []byte(`{"$ref":"#","type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.ValidateMap(map[string]any{"a": 1.0}).IsValid() {
		t.Fatal("valid instance refused")
	}
}

func TestValidationWork(t *testing.T) {
	a, err := NewChecker([]byte(`{"type":"object","additionalProperties":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	// perValue: the object 1, each member 1, each item 3.
	if want := []int64{1, 1, 3}; !slices.Equal(a.perValue, want) {
		t.Fatalf("perValue = %v, want %v", a.perValue, want)
	}
	items := func(n int) string {
		return `{"a":[` + strings.TrimSuffix(strings.Repeat(`1,`, n), ",") + `]}`
	}
	if err := checkJSON(a, items(1000)); err != nil {
		t.Fatalf("1000 items refused: %v", err)
	}
	err = checkJSON(a, items(maxValidationWork/3+1))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "schema evaluations") {
		t.Fatalf("too much work: got %v", err)
	}
	// Values the schema never descends into cost nothing.
	open, err := NewChecker([]byte(`{"type":"object"}`), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkJSON(open, items(maxValidationWork)); err != nil {
		t.Fatalf("open schema: %v", err)
	}
}

// BenchmarkEvaluation measures what one schema evaluation costs, the unit
// of maxValidationWork.
func BenchmarkEvaluation(b *testing.B) {
	a, err := NewChecker([]byte(`{"type":"object","additionalProperties":{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`), testLimits)
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"a":[` + strings.TrimSuffix(strings.Repeat(`1,"x",`, 5000), ",") + `]}`)
	m, levels, err := Decode(args)
	if err != nil {
		b.Fatal(err)
	}
	work := validationWork(a.perValue, levels)
	b.ResetTimer()
	for b.Loop() {
		if err := a.Check(m, levels); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*work), "ns/evaluation")
}

// BenchmarkArgCheck measures one call's validation, calls to one tool
// running in parallel, against a schema whose validation writes into it.
func BenchmarkArgCheck(b *testing.B) {
	a, err := NewChecker([]byte(writingSchema), testLimits)
	if err != nil {
		b.Fatal(err)
	}
	m, levels, err := Decode([]byte(`{"id":"abc","x_1":"def","x_2":"ghi","n_1":3,"tags":["a@example.com","b@example.com"]}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := a.Check(m, levels); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(a.copies.Load()), "copies")
}
