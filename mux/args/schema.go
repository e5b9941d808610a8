package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/kaptinlin/jsonschema"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// Checker checks one tool's arguments against its inputSchema.
//
// A tool's schema is compiled when it is listed, to vet it, and that copy
// is dropped: a compiled schema takes some 12 times its inputSchema's size,
// and most listed tools are never called. The copy calls use is compiled on
// the first call and kept until the catalog changes.
//
// jsonschema v0.9.8 writes into a compiled schema while validating: every
// evaluation of a schema with patternProperties replaces its map of
// compiled patterns, and pattern caches its regexp on first use. So a
// compiled copy validates one call at a time, and a Checker keeps
// copies rather than a lock: a call takes an idle copy, or compiles one
// when every copy is in use, and puts it back when done. No call waits for
// another, however heavy its arguments, while the spare copies of all
// tools fit in spareSchemaBudget.
type Checker struct {
	raw []byte // the inputSchema, never changed after NewChecker
	// idle is one compiled copy kept through garbage collections, so that a
	// tool never called concurrently is compiled for calls once per catalog
	// change; spare holds the copies compiled for concurrent calls, which
	// the runtime may drop.
	idle  atomic.Pointer[jsonschema.Schema]
	spare sync.Pool
	// kept is set once the copy idle keeps has been compiled (by the first
	// call), which the spare budget does not pay for.
	kept atomic.Bool
	// copies counts the copies compiled for calls.
	copies atomic.Int64
	// Once the budget is spent, calls finding no idle copy take turns on
	// one more copy of the tool's own.
	overflowMu sync.Mutex
	overflow   *jsonschema.Schema
	// perValue bounds the work of validating one value at each depth (see
	// schemaWork).
	perValue []int64
	// validating, when set (by tests), is called once a check holds its
	// copy, before it validates.
	validating func()
	// flat is the schema read as a flatSchema on the first check, nil if
	// it is not one: arguments it accepts need no compiled copy.
	flatOnce sync.Once
	flat     *flatSchema
}

// spareSchemaBudget bounds the inputSchema bytes of all spare copies alive
// at once, mcpmux-wide; a copy takes about 12 times its inputSchema's size
// in memory (some 100 MiB for the whole budget). Without it, concurrent
// calls to a tool with a large schema would each cost mcpmux a copy.
var spareSchemaBudget int64 = 8 << 20

// spareSchemaBytes is the inputSchema bytes of the spare copies alive.
var spareSchemaBytes atomic.Int64

// schemaLimitError is a schema refused for its size, its depth or the work
// it could take; reason is fit for the log line of a tool left out.
type schemaLimitError struct {
	reason string
	err    error
}

func (e *schemaLimitError) Error() string { return e.err.Error() }
func (e *schemaLimitError) Unwrap() error { return e.err }

// SchemaRefusal is the reason a tool whose schema NewChecker refused is
// left out.
func SchemaRefusal(err error) string {
	if le, ok := errors.AsType[*schemaLimitError](err); ok {
		return le.reason
	}
	return "its inputSchema does not compile"
}

// NewChecker vets an inputSchema by compiling it, on a compiler of its
// own: two tools whose schemas share an $id would otherwise get the first
// one's schema. raw is kept, for the copies calls compile, and must not
// change. It
// refuses a schema larger than lim.MaxSchemaBytes or nested deeper than
// lim.MaxSchemaDepth, and one that could take too much work to validate
// against (see schemaWork).
func NewChecker(raw []byte, lim config.Limits) (*Checker, error) {
	if int64(len(raw)) > lim.MaxSchemaBytes {
		return nil, &schemaLimitError{"its inputSchema is larger than max_schema_bytes",
			fmt.Errorf("inputSchema is %d bytes, more than max_schema_bytes (%s)", len(raw), config.FormatSize(lim.MaxSchemaBytes))}
	}
	if d := jsonDepth(raw); d > lim.MaxSchemaDepth {
		return nil, &schemaLimitError{"its inputSchema is nested deeper than max_schema_depth",
			fmt.Errorf("inputSchema nests objects and arrays %d deep, more than max_schema_depth (%d)", d, lim.MaxSchemaDepth)}
	}
	s, err := compileSchema(newCompiler(), raw)
	if err != nil {
		return nil, err
	}
	if err := checkPatterns(s); err != nil {
		return nil, &schemaLimitError{"its inputSchema has a pattern longer than mcpmux allows", err}
	}
	ignoreContentSchemas(s)
	perValue, err := schemaWork(s)
	if err != nil {
		return nil, &schemaLimitError{"its inputSchema could take too much work to validate against", err}
	}
	return &Checker{raw: raw, perValue: perValue}, nil
}

// Memo holds what vetting found of the inputSchemas that passed it,
// by their exact bytes, for one child's catalog: vetting is a function of
// the bytes and the limits alone, and compiling is most of what building a
// catalog costs. Tools listing the same schema share its bytes.
type Memo map[string]Vetted

// Vetted is what vetting found of one inputSchema, which a checker needs:
// its bytes and the work of validating a value at each depth.
type Vetted struct {
	raw      []byte
	perValue []int64
}

// Checker returns a new checker of the vetted schema, which compiles its
// own copies for calls.
func (v Vetted) Checker() *Checker { return &Checker{raw: v.raw, perValue: v.perValue} }

// Vetted is what vetting found of a's schema, to make new checkers of.
func (a *Checker) Vetted() Vetted { return Vetted{raw: a.raw, perValue: a.perValue} }

// Schema is the inputSchema a checks against, which must not be changed.
func (a *Checker) Schema() []byte { return a.raw }

// Checker returns the checker of one tool's inputSchema raw (see
// NewChecker), vetting it only when neither prev (what the child's last
// catalog vetted) nor next (this catalog, so far) has; next records it. A
// refused schema is not recorded, so it is vetted, and its refusal logged,
// each time. The checker is new either way: compiled copies for calls are
// never carried from one catalog to the next.
func (memo Memo) Checker(raw []byte, lim config.Limits, prev Memo) (*Checker, error) {
	v, ok := memo[string(raw)]
	if !ok {
		if v, ok = prev[string(raw)]; !ok {
			a, err := NewChecker(raw, lim)
			if err != nil {
				return nil, err
			}
			v = a.Vetted()
		}
		memo[string(v.raw)] = v
	}
	return v.Checker(), nil
}

// Check returns nil when args fit, or an error naming each failing path.
// levels is how many values args has at each depth (from Decode or Object);
// arguments that could take more than maxValidationWork are refused
// unvalidated.
func (a *Checker) Check(args map[string]any, levels []int) error {
	if w := validationWork(a.perValue, levels); w > maxValidationWork {
		return fmt.Errorf("%w: validating these arguments against the tool's inputSchema could take %s schema evaluations, more than the %d allowed; send fewer values",
			ErrInvalid, workString(w), maxValidationWork)
	}
	if a.validating == nil {
		a.flatOnce.Do(func() { a.flat = readFlatSchema(a.raw) })
		if a.flat != nil && a.flat.accepts(args) {
			return nil
		}
	}
	s, err := a.take()
	if err != nil {
		return err
	}
	if s == nil {
		a.overflowMu.Lock()
		defer a.overflowMu.Unlock()
		if a.overflow == nil {
			if a.overflow, err = a.compile(); err != nil {
				return err
			}
		}
		s = a.overflow
	} else {
		defer a.give(s)
	}
	if a.validating != nil {
		a.validating()
	}
	return validateArgs(s, args)
}

// take returns a compiled copy no other call is using, or nil when there
// is none and the budget for spare copies is spent.
func (a *Checker) take() (*jsonschema.Schema, error) {
	if s := a.idle.Swap(nil); s != nil {
		return s, nil
	}
	if s, ok := a.spare.Get().(*jsonschema.Schema); ok {
		return s, nil
	}
	if !a.kept.Swap(true) {
		return a.compile()
	}
	n := int64(len(a.raw))
	if spareSchemaBytes.Add(n) > spareSchemaBudget {
		spareSchemaBytes.Add(-n)
		return nil, nil
	}
	s, err := a.compile()
	if err != nil {
		spareSchemaBytes.Add(-n)
		return nil, err
	}
	runtime.AddCleanup(s, func(n int64) { spareSchemaBytes.Add(-n) }, n)
	return s, nil
}

// compile compiles a copy of the schema for calls, as NewChecker did to
// vet it. Compiling the same bytes with the same settings cannot fail unless
// the library is not deterministic.
func (a *Checker) compile() (*jsonschema.Schema, error) {
	s, err := compileSchema(newCompiler(), a.raw)
	if err != nil {
		return nil, fmt.Errorf("compiling the tool's inputSchema for calls: %w", err)
	}
	ignoreContentSchemas(s)
	a.copies.Add(1)
	return s, nil
}

// give returns a copy taken by take.
func (a *Checker) give(s *jsonschema.Schema) {
	if !a.idle.CompareAndSwap(nil, s) {
		a.spare.Put(s)
	}
}

// ignoreContentSchemas drops every contentSchema of a compiled schema.
// JSON Schema 2020-12 makes it an annotation; jsonschema v0.9.8 asserts it
// on the decoded content of a string, a value of unbounded depth that the
// work bound cannot see.
func ignoreContentSchemas(root *jsonschema.Schema) {
	seen := map[*jsonschema.Schema]bool{}
	var walk func(*jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if seen[s] {
			return
		}
		seen[s] = true
		forEachSubschema(s, walk)
		s.ContentSchema = nil
	}
	walk(root)
}

// maxPatternBytes bounds a pattern or patternProperties regexp. Go's
// regexp matches in time linear in the input, but also in the size of the
// pattern, which the schema alone decides.
const maxPatternBytes = 1024

// checkPatterns refuses a compiled schema with a regexp over
// maxPatternBytes.
func checkPatterns(root *jsonschema.Schema) error {
	seen := map[*jsonschema.Schema]bool{}
	var walk func(*jsonschema.Schema) error
	walk = func(s *jsonschema.Schema) error {
		if seen[s] {
			return nil
		}
		seen[s] = true
		patterns := []string{}
		if s.Pattern != nil {
			patterns = append(patterns, *s.Pattern)
		}
		if s.PatternProperties != nil {
			for p := range *s.PatternProperties {
				patterns = append(patterns, p)
			}
		}
		for _, p := range patterns {
			if len(p) > maxPatternBytes {
				return fmt.Errorf("a pattern is %d bytes, more than the %d allowed", len(p), maxPatternBytes)
			}
		}
		var err error
		forEachSubschema(s, func(c *jsonschema.Schema) {
			if err == nil {
				err = walk(c)
			}
		})
		return err
	}
	return walk(root)
}

// jsonDepth returns how deeply valid JSON nests objects and arrays.
func jsonDepth(raw []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			depth++
			deepest = max(deepest, depth)
		case b == '}' || b == ']':
			depth--
		}
	}
	return deepest
}

// ObjectSchema checks that a tool's input or output schema has the shape
// MCP requires, which strict clients enforce on the whole tools/list: one
// tool they refuse would cost every tool. A schema that leaves out its
// top-level "type" gets "type": "object", which arguments and structured
// content always are anyway; the rest of the schema is left as it is.
func ObjectSchema(raw json.RawMessage) (json.RawMessage, error) {
	// Keys are matched exactly, as clients do; a struct would also take
	// "Type" for "type". A key given twice counts as its last, as a
	// decoder keeps it. Read in place: a catalog's every schema comes here.
	top, ok := jsonwire.Object{}, jsonwire.Valid(raw)
	if ok {
		top, ok = jsonwire.Members(raw)
	}
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	typ := top.Last("type")
	hasType := typ != nil
	if hasType && string(raw[typ.Start:typ.End]) != `"object"` {
		return nil, fmt.Errorf("type is %s, not \"object\"", raw[typ.Start:typ.End])
	}
	if props := top.Last("properties"); props != nil {
		if err := schemaProperties(raw[props.Start:props.End]); err != nil {
			return nil, err
		}
	}
	if !hasType {
		rest := bytes.TrimSpace(raw[bytes.IndexByte(raw, '{')+1:])
		sep := ","
		if len(rest) > 0 && rest[0] == '}' {
			sep = ""
		}
		raw = append([]byte(`{"type":"object"`+sep), rest...)
	}
	return raw, nil
}

// schemaProperties says why the valid JSON value props is not an object of
// schema objects, or nil. Of a name given twice only the last counts.
func schemaProperties(props []byte) error {
	o, ok := jsonwire.Members(props)
	if !ok {
		return fmt.Errorf("properties is not an object")
	}
	var last map[string]int // made only when a property is not an object
	for i, m := range o.Members {
		if props[m.Start] == '{' {
			continue
		}
		if last == nil {
			last = make(map[string]int, len(o.Members))
			for j, m := range o.Members {
				last[decodedName(m.Key)] = j
			}
		}
		if last[decodedName(m.Key)] == i {
			return fmt.Errorf("property %q is %s, not a schema object", decodedName(m.Key), props[m.Start:m.End])
		}
	}
	return nil
}

// decodedName is a member name as encoding/json decodes it: each byte that
// is not UTF-8 becomes U+FFFD.
func decodedName(k string) string {
	if utf8.ValidString(k) {
		return k
	}
	var b strings.Builder
	for len(k) > 0 {
		r, size := utf8.DecodeRuneInString(k)
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(k[:size])
		}
		k = k[size:]
	}
	return b.String()
}

// newCompiler returns a compiler that never leaves the machine: a child's
// schema must not make mcpmux fetch anything.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	for scheme := range c.Loaders {
		delete(c.Loaders, scheme)
	}
	return c
}

// compileSchema compiles one tool's inputSchema. A schema whose $refs do not
// all resolve is refused: jsonschema v0.9.8 would otherwise accept anything
// against it.
func compileSchema(c *jsonschema.Compiler, raw []byte) (*jsonschema.Schema, error) {
	s, err := c.Compile(raw)
	if err != nil {
		return nil, err
	}
	if refs := s.UnresolvedReferenceURIs(); len(refs) > 0 {
		return nil, fmt.Errorf("unresolvable $ref: %s", strings.Join(refs, ", "))
	}
	return s, nil
}

// ErrInvalid marks a validation failure; its text is written for
// the model and names each failing path.
var ErrInvalid = errors.New("invalid arguments")

// validateArgs checks args against a compiled schema and returns an error
// whose message lists every leaf failure with its JSON pointer.
func validateArgs(s *jsonschema.Schema, args map[string]any) error {
	res := s.ValidateMap(args)
	if res.IsValid() {
		return nil
	}
	problems := leafErrors(res)
	if len(problems) == 0 {
		problems = []string{"(root): does not match the schema"}
	}
	return fmt.Errorf("%w:\n- %s", ErrInvalid, strings.Join(problems, "\n- "))
}

// leafErrors renders the deepest failures of a result, one per path, in a
// stable order. A property that is missing is reported by "required" on its
// parent; the library also evaluates the missing value as null against the
// property's own schema, and that echo is dropped.
func leafErrors(res *jsonschema.EvaluationResult) []string {
	type leaf struct{ path, keyword, msg string }
	var leaves []leaf
	missing := map[string]bool{}
	// A detail's InstanceLocation is relative to its parent's.
	var walk func(r *jsonschema.EvaluationResult, base string)
	walk = func(r *jsonschema.EvaluationResult, base string) {
		if r.Valid {
			return
		}
		here := base + r.InstanceLocation
		childInvalid := false
		for _, d := range r.Details {
			if !d.Valid {
				childInvalid = true
				walk(d, here)
			}
		}
		for kw, e := range r.Errors {
			if kw == "required" {
				for _, p := range missingProps(e.Params) {
					missing[here+"/"+p] = true
				}
			}
			// An error on a node with failing children summarises them
			// ("properties do not match"), except for the keywords that only
			// ever report on this node itself.
			if childInvalid && !selfKeyword(kw) {
				continue
			}
			leaves = append(leaves, leaf{here, kw, e.Error()})
		}
	}
	walk(res, "")

	seen := map[string]bool{}
	var out []string
	for _, l := range leaves {
		if missing[l.path] && l.keyword != "required" {
			continue
		}
		path := l.path
		if path == "" {
			path = "(root)"
		}
		line := path + ": " + l.msg
		if !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return out
}

// selfKeyword reports keywords whose error concerns the node itself even when
// some of its children also fail.
func selfKeyword(kw string) bool {
	switch kw {
	case "required", "type", "minProperties", "maxProperties", "additionalProperties",
		"dependentRequired", "const", "enum", "minItems", "maxItems", "uniqueItems":
		return true
	}
	return false
}

func missingProps(params map[string]any) []string {
	// v0.9.8 reports one missing property as "property": "'a'" and several
	// as "properties": "'a', 'b'".
	var out []string
	for _, key := range []string{"property", "properties"} {
		v, _ := params[key].(string)
		for _, p := range strings.Split(v, ",") {
			p = strings.Trim(strings.TrimSpace(p), "'\"")
			if p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
