package args

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kaptinlin/jsonschema"
)

// Validation work. jsonschema v0.9.8 has no budget of its own, and a small
// schema can make it do a great deal: $defs that each apply the next one
// twice (allOf: [{$ref: next}, {$ref: next}]) double the work with every
// definition. What one validation costs is bounded here instead, before it
// runs, by counting schema evaluations (the library's unit of work: one
// subschema applied to one value):
//
//   - when a tool is listed, schemaWork follows the compiled schema as the
//     library evaluates it and finds, for each depth j up to
//     maxArgumentDepth, how many evaluations one argument value at depth j
//     can take at most (perValue[j]); a schema for which any of these
//     exceeds maxEvaluationsPerValue is refused;
//   - when a tool is called, Decode counts the values at each
//     depth, and a call whose sum of count × perValue exceeds
//     maxValidationWork is refused before it is validated.
//
// Every applicator is counted as if it applied (both branches of if, every
// patternProperties entry, additionalProperties as well as properties),
// which over-estimates but never under-estimates.

const (
	// maxEvaluationsPerValue bounds the evaluations one value may take.
	// Ordinary schemas, even large oneOf unions, stay in the hundreds.
	maxEvaluationsPerValue = 10_000
	// maxValidationWork bounds the evaluations of one call. At about 3µs
	// each (BenchmarkEvaluation), it is under a second of one core; ordinary
	// calls take tens to thousands.
	maxValidationWork = 250_000
	// workCap keeps the counts from overflowing; anything at it is refused.
	workCap = int64(1) << 50
)

// errSchemaCycle marks a schema that refers to itself without descending
// into the value (a $ref chain that comes back to where it started).
var errSchemaCycle = errors.New("its $refs form a cycle that never descends into the arguments")

// schemaNode is one compiled subschema, as the work count sees it.
type schemaNode struct {
	// weight is what one evaluation of the node costs by itself, in
	// evaluations: the library walks its enum, its required list and all
	// its properties every time.
	weight  int64
	inPlace []int // applied to the same value: $ref, allOf, anyOf, oneOf, not, if/then/else, dependentSchemas
	// dynamic are the schemas a $dynamicRef may resolve to, of which the
	// dynamic scope picks one.
	dynamic []int
	// required lists the properties evaluated against null when missing
	// (required ones without a default).
	required []int
	// One member of an object: at most one of props applies; every one of
	// member applies. One item of an array: at most one of prefix; every
	// one of item.
	props, member, prefix, item []int
}

// schemaWork returns perValue for a compiled schema (see above), with its
// trailing zeros left out.
func schemaWork(root *jsonschema.Schema) ([]int64, error) {
	g := workGraph{ids: map[*jsonschema.Schema]int{}, anchors: map[string][]*jsonschema.Schema{}}
	g.collectAnchors(root, map[*jsonschema.Schema]bool{})
	g.id(root)
	for i := 0; i < len(g.order); i++ { // g.order grows as ids are handed out
		g.build(i)
	}
	topo, err := g.topo()
	if err != nil {
		return nil, err
	}
	n := len(g.nodes)
	base := make([]int64, n) // evaluations of a scalar: in place only
	for _, i := range topo {
		base[i] = add(g.nodes[i].weight+sumOf(base, g.nodes[i].inPlace), maxOf(base, g.nodes[i].dynamic))
	}
	prev, cur := make([]int64, n), make([]int64, n)
	var perValue []int64
	for depth := 0; depth <= maxArgumentDepth; depth++ {
		live := false
		for _, i := range topo {
			nd := &g.nodes[i]
			var v int64
			if depth == 0 {
				v = add(nd.weight, sumOf(base, nd.required))
			} else {
				obj := add(maxOf(prev, nd.props), sumOf(prev, nd.member))
				arr := add(maxOf(prev, nd.prefix), sumOf(prev, nd.item))
				v = max(obj, arr)
			}
			v = add(add(v, sumOf(cur, nd.inPlace)), maxOf(cur, nd.dynamic))
			cur[i] = v
			live = live || v > 0
		}
		if !live {
			break
		}
		perValue = append(perValue, cur[0])
		if cur[0] > maxEvaluationsPerValue {
			return nil, fmt.Errorf("validating one argument value at depth %d could take %s schema evaluations, more than the %d allowed",
				depth, workString(cur[0]), maxEvaluationsPerValue)
		}
		prev, cur = cur, prev
	}
	for len(perValue) > 0 && perValue[len(perValue)-1] == 0 {
		perValue = perValue[:len(perValue)-1]
	}
	return perValue, nil
}

// validationWork is the most evaluations validating arguments with levels
// values at each depth can take.
func validationWork(perValue []int64, levels []int) int64 {
	var w int64
	for j, n := range levels {
		if j < len(perValue) {
			w = add(w, mul(int64(n), perValue[j]))
		}
	}
	return w
}

func workString(n int64) string {
	if n >= workCap {
		return "an unbounded number of"
	}
	return fmt.Sprint(n)
}

type workGraph struct {
	ids     map[*jsonschema.Schema]int
	order   []*jsonschema.Schema
	nodes   []schemaNode
	anchors map[string][]*jsonschema.Schema // $dynamicAnchor -> schemas declaring it
}

// id numbers s the first time it is seen; the root is 0.
func (g *workGraph) id(s *jsonschema.Schema) int {
	if i, ok := g.ids[s]; ok {
		return i
	}
	i := len(g.order)
	g.ids[s] = i
	g.order = append(g.order, s)
	g.nodes = append(g.nodes, schemaNode{})
	return i
}

func (g *workGraph) idsOf(list []*jsonschema.Schema) []int {
	var out []int
	for _, s := range list {
		if s != nil {
			out = append(out, g.id(s))
		}
	}
	return out
}

func (g *workGraph) mapIDs(m map[string]*jsonschema.Schema) []int {
	var out []int
	for _, s := range m {
		if s != nil {
			out = append(out, g.id(s))
		}
	}
	return out
}

// collectAnchors finds every $dynamicAnchor, since a $dynamicRef may
// resolve to any schema declaring its anchor.
func (g *workGraph) collectAnchors(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) {
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if s.DynamicAnchor != "" {
		g.anchors[s.DynamicAnchor] = append(g.anchors[s.DynamicAnchor], s)
	}
	forEachSubschema(s, func(c *jsonschema.Schema) { g.collectAnchors(c, seen) })
}

// build records node i's edges, as the library applies its keywords.
func (g *workGraph) build(i int) {
	s := g.order[i]
	nd := schemaNode{weight: 1}
	if s.Boolean == nil {
		nd.weight += int64(len(s.Enum) + len(s.Required))
		if s.Properties != nil {
			nd.weight += int64(len(*s.Properties))
		}
		inPlace := []*jsonschema.Schema{s.ResolvedRef, s.Not, s.If, s.Then, s.Else}
		inPlace = append(append(append(inPlace, s.AllOf...), s.AnyOf...), s.OneOf...)
		if d := s.ResolvedDynamicRef; d != nil {
			nd.dynamic = []int{g.id(d)}
			for _, a := range g.anchors[d.DynamicAnchor] {
				if a != d && d.DynamicAnchor != "" {
					nd.dynamic = append(nd.dynamic, g.id(a))
				}
			}
		}
		nd.inPlace = append(g.idsOf(inPlace), g.mapIDs(s.DependentSchemas)...)
		if s.Properties != nil {
			props := map[string]*jsonschema.Schema(*s.Properties)
			nd.props = g.mapIDs(props)
			for _, r := range s.Required {
				if p := props[r]; p != nil && p.Default == nil {
					nd.required = append(nd.required, g.id(p))
				}
			}
		}
		member := []*jsonschema.Schema{s.AdditionalProperties, s.UnevaluatedProperties, s.PropertyNames}
		if s.PatternProperties != nil {
			for _, p := range *s.PatternProperties {
				member = append(member, p)
			}
		}
		nd.member = g.idsOf(member)
		nd.prefix = g.idsOf(s.PrefixItems)
		nd.item = g.idsOf([]*jsonschema.Schema{s.Items, s.Contains, s.UnevaluatedItems})
	}
	g.nodes[i] = nd
}

// topo orders the nodes so that every node comes after those it applies in
// place, or reports a cycle of in-place applications.
func (g *workGraph) topo() ([]int, error) {
	const (
		unseen = iota
		active
		done
	)
	state := make([]uint8, len(g.nodes))
	out := make([]int, 0, len(g.nodes))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case active:
			return errSchemaCycle
		case done:
			return nil
		}
		state[i] = active
		for _, c := range slices.Concat(g.nodes[i].inPlace, g.nodes[i].dynamic) {
			if err := visit(c); err != nil {
				return err
			}
		}
		state[i] = done
		out = append(out, i)
		return nil
	}
	for i := range g.nodes {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// forEachSubschema calls fn for every subschema s holds or refers to.
func forEachSubschema(s *jsonschema.Schema, fn func(*jsonschema.Schema)) {
	one := func(list ...*jsonschema.Schema) {
		for _, c := range list {
			if c != nil {
				fn(c)
			}
		}
	}
	many := func(m map[string]*jsonschema.Schema) {
		for _, c := range m {
			one(c)
		}
	}
	one(s.ResolvedRef, s.ResolvedDynamicRef, s.Not, s.If, s.Then, s.Else, s.Items, s.Contains,
		s.AdditionalProperties, s.PropertyNames, s.UnevaluatedItems, s.UnevaluatedProperties, s.ContentSchema)
	one(s.AllOf...)
	one(s.AnyOf...)
	one(s.OneOf...)
	one(s.PrefixItems...)
	many(s.Defs)
	many(s.DependentSchemas)
	if s.Properties != nil {
		many(*s.Properties)
	}
	if s.PatternProperties != nil {
		many(*s.PatternProperties)
	}
}

func add(a, b int64) int64 { return min(a+b, workCap) }

func mul(a, b int64) int64 {
	if a != 0 && b > workCap/a {
		return workCap
	}
	return min(a*b, workCap)
}

func sumOf(v []int64, ids []int) int64 {
	var s int64
	for _, i := range ids {
		s = add(s, v[i])
	}
	return s
}

func maxOf(v []int64, ids []int) int64 {
	var m int64
	for _, i := range ids {
		m = max(m, v[i])
	}
	return m
}
