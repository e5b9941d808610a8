package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/mcpmux/mcpmux/internal/glob"
)

// CostLimit bounds the work of one evaluation of one rule, in CEL's cost
// units (roughly one per elementary operation; a string comparison costs
// one per ten bytes). A rule over a path or a few fields costs tens; a
// runaway expression (a comprehension nested over a long list) is stopped
// here, in a millisecond or so, and the call is refused.
const CostLimit = 100_000

// A Rule is one [[rule]] table of a policy file: a CEL condition on the
// calls of the tools it names. It is compiled when the policy is parsed and
// never modified after, so it may be evaluated from any goroutine.
type Rule struct {
	Index   int    // 1-based, in file order
	File    string // the policy file
	Line    int    // the line of its allow_if or deny_if
	Message string // what a refused caller is told

	tools    glob.Set
	patterns []string  // sorted and de-duplicated, for sameMeaning
	written  []pattern // the tools patterns in file order, for warnings
	deny     bool      // deny_if rather than allow_if
	expr     string
	message  string // as written; "" for the default
	prg      cel.Program
	reads    reads
	// lookups maps the id of each field or index expression under args or
	// claims to the variable it reads, so that a missing key can be blamed
	// on the right one.
	lookups map[int64]string
}

// reads is the set of variables an expression refers to.
type reads uint8

const (
	readsArgs reads = 1 << iota
	readsClaims
	readsTool // tool or server: differs from tool to tool
)

// The variables a rule's expression sees.
var variables = map[string]reads{
	"args":     readsArgs,
	"claims":   readsClaims,
	"tool":     readsTool,
	"server":   readsTool,
	"identity": 0,
}

// Input is what a rule is evaluated on. Args and Claims may be nil, which
// the expression sees as an empty map.
type Input struct {
	Args   map[string]any // the call's validated arguments
	Tool   string         // the exposed name
	Server string         // its server's alias
	Claims map[string]any // the caller's JWT claims
}

// Refusal is a rule refusing a call: its condition said no, or it could not
// be evaluated (Err says why), which refuses too.
type Refusal struct {
	Rule *Rule
	Err  error
}

// ErrCostLimit is the Err of a Refusal whose rule did more work than
// CostLimit allows.
var ErrCostLimit = fmt.Errorf("the rule's evaluation exceeded its cost limit (%d)", CostLimit)

// MissingKeyError is the Err of a Refusal whose rule read a key that the
// call's arguments or the caller's claims do not have.
type MissingKeyError struct {
	In  string // "args" or "claims"
	Key string
}

// Error says which of the arguments and the claims lacks the key.
func (e *MissingKeyError) Error() string {
	if e.In == "claims" {
		return "the caller's claims have no key " + e.Key
	}
	return "the arguments have no key " + e.Key
}

// Error returns what the caller is told: the rule's message and, when the
// rule could not be evaluated, why.
func (r *Refusal) Error() string {
	if r.Err == nil {
		return r.Rule.Message
	}
	if mk, ok := errors.AsType[*MissingKeyError](r.Err); ok {
		return fmt.Sprintf("%s (policy rule %d could not be evaluated: %v, so the call was refused)",
			r.Rule.Message, r.Rule.Index, mk)
	}
	return fmt.Sprintf("%s (policy rule %d could not be evaluated on this call, so the call was refused: %v)",
		r.Rule.Message, r.Rule.Index, r.Err)
}

// Applies reports whether the rule governs calls of the tool exposed as
// name.
func (r *Rule) Applies(name string) bool { return r.tools.Match(name) }

// ReadsArgs reports whether the rule's expression refers to args. A rule
// that does not decides the same for every call of a tool by one caller, so
// it also decides whether the caller sees the tool at all.
func (r *Rule) ReadsArgs() bool { return r.reads&readsArgs != 0 }

// ReadsClaims reports whether the rule's expression refers to claims, so
// that callers of one identity may get different answers.
func (r *Rule) ReadsClaims() bool { return r.reads&readsClaims != 0 }

// ReadsTool reports whether the rule's expression refers to tool or server,
// so that tools it applies to may get different answers.
func (r *Rule) ReadsTool() bool { return r.reads&readsTool != 0 }

// Kind returns "allow_if" or "deny_if".
func (r *Rule) Kind() string {
	if r.deny {
		return keyDenyIf
	}
	return keyAllowIf
}

// Expr returns the expression as written.
func (r *Rule) Expr() string { return r.expr }

// String returns "rule N (FILE:LINE)", for logs.
func (r *Rule) String() string {
	return "rule " + strconv.Itoa(r.Index) + " (" + r.File + ":" + strconv.Itoa(r.Line) + ")"
}

// Check evaluates the rule on in, on behalf of identity. It returns nil when
// the rule lets the call through, else a *Refusal. An expression that fails
// (a missing key, a wrong type) or exceeds CostLimit refuses: a rule that
// cannot say yes says no.
func (r *Rule) Check(identity string, in *Input) *Refusal {
	out, _, err := r.prg.Eval(&activation{identity: identity, in: in})
	if err != nil {
		var cancelled interpreter.EvalCancelledError
		if errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded {
			err = ErrCostLimit
		} else if mk := r.missingKey(err); mk != nil {
			err = mk
		}
		return &Refusal{Rule: r, Err: err}
	}
	b, ok := out.Value().(bool)
	if !ok { // the checker made sure it is a bool
		return &Refusal{Rule: r, Err: fmt.Errorf("the expression gave %s, not a bool", out.Type())}
	}
	if b == r.deny {
		return &Refusal{Rule: r}
	}
	return nil
}

// missingKey returns what err says in words when it is a key the
// arguments or the claims lack, else nil. CEL labels the error with the
// expression that looked the key up.
func (r *Rule) missingKey(err error) *MissingKeyError {
	cerr, ok := errors.AsType[*types.Err](err)
	if !ok {
		return nil
	}
	key, ok := strings.CutPrefix(cerr.Error(), "no such key: ")
	if !ok {
		return nil
	}
	in, ok := r.lookups[cerr.NodeID()]
	if !ok {
		return nil
	}
	return &MissingKeyError{In: in, Key: key}
}

// lookupsOf maps each field or index expression of e whose operands lead
// down to the variable args or claims to that variable.
func lookupsOf(e celast.Expr) map[int64]string {
	m := map[int64]string{}
	celast.PreOrderVisit(e, celast.NewExprVisitor(func(e celast.Expr) {
		if !isLookup(e) {
			return
		}
		root := e
		for isLookup(root) {
			if root.Kind() == celast.SelectKind {
				root = root.AsSelect().Operand()
			} else {
				root = root.AsCall().Args()[0]
			}
		}
		// An iteration variable named args or claims is taken for the
		// variable, as reads does.
		if root.Kind() == celast.IdentKind && (root.AsIdent() == "args" || root.AsIdent() == "claims") {
			m[e.ID()] = root.AsIdent()
		}
	}))
	return m
}

// isLookup reports whether e looks a key up in its operand: a field
// (x.key, x.?key) or an index (x["key"], x[?"key"]).
func isLookup(e celast.Expr) bool {
	switch e.Kind() {
	case celast.SelectKind:
		return !e.AsSelect().IsTestOnly()
	case celast.CallKind:
		switch e.AsCall().FunctionName() {
		case operators.Index, operators.OptIndex, operators.OptSelect:
			return len(e.AsCall().Args()) == 2
		}
	}
	return false
}

// activation hands the expression its variables without building a map.
type activation struct {
	identity string
	in       *Input
}

var emptyMap = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		if a.in.Args == nil {
			return emptyMap, true
		}
		return a.in.Args, true
	case "claims":
		if a.in.Claims == nil {
			return emptyMap, true
		}
		return a.in.Claims, true
	case "tool":
		return a.in.Tool, true
	case "server":
		return a.in.Server, true
	case "identity":
		return a.identity, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// celEnv is the one environment every rule is compiled in: CEL's standard
// library and the five variables. JSON numbers reach args as doubles, so
// numbers compare across types (args.count < 10).
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	opts := []cel.EnvOption{cel.CrossTypeNumericComparisons(true)}
	for name := range variables {
		t := cel.StringType
		if name == "args" || name == "claims" {
			t = cel.MapType(cel.StringType, cel.DynType)
		}
		opts = append(opts, cel.Variable(name, t))
	}
	return cel.NewEnv(opts...)
})

// ruleDecl is a [[rule]] table as written, before it is compiled.
type ruleDecl struct {
	line     int // of the [[rule]] header
	tools    []pattern
	toolsSet bool
	kind     string // keyAllowIf or keyDenyIf; "" if neither was given
	expr     string
	exprLine int
	// exprLines tells whether a line of the expression is a line of the
	// file (a multi-line string without line-ending backslashes), so that
	// an error on its Nth line is reported at exprLine+N-1.
	exprLines bool
	message   string
	// conflict is the second of allow_if and deny_if when a table has both,
	// compiled only to report its errors.
	conflict *ruleDecl
}

// The keys of a [[rule]] table.
const (
	keyTools   = "tools"
	keyAllowIf = "allow_if"
	keyDenyIf  = "deny_if"
	keyMessage = "message"
)

var ruleKeys = []string{keyTools, keyAllowIf, keyDenyIf, keyMessage}

// compileRule compiles the index'th rule of file; errors are located at the
// line of the expression.
func compileRule(file string, index int, d *ruleDecl) (*Rule, Errors) {
	env, err := celEnv()
	if err != nil { // the declarations are fixed; cannot happen
		return nil, Errors{&Error{File: file, Line: d.exprLine, Msg: "rules cannot be compiled: " + err.Error()}}
	}
	ast, iss := env.Compile(d.expr)
	if iss.Err() != nil {
		var errs Errors
		for _, e := range iss.Errors() {
			line := d.exprLine
			where := fmt.Sprintf("column %d", e.Location.Column()+1)
			if n := e.Location.Line(); n > 1 {
				if d.exprLines {
					line += n - 1
				} else {
					where = fmt.Sprintf("line %d, column %d of the expression", n, e.Location.Column()+1)
				}
			}
			errs = append(errs, &Error{File: file, Line: line,
				Msg: fmt.Sprintf("%s: %s: %s", d.kind, where, oneLine(e.Message))})
		}
		return nil, errs
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, Errors{&Error{File: file, Line: d.exprLine,
			Msg: fmt.Sprintf("%s must be a bool expression, not %s (compare a field explicitly, as in args.flag == true)", d.kind, t)}}
	}
	prg, err := env.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, Errors{&Error{File: file, Line: d.exprLine, Msg: fmt.Sprintf("%s: %s", d.kind, oneLine(err.Error()))}}
	}
	globs := make([]string, len(d.tools))
	for i, pat := range d.tools {
		globs[i] = pat.glob
	}
	tools, err := glob.CompileSet(globs)
	if err != nil { // patterns were checked when parsed
		return nil, Errors{&Error{File: file, Line: d.line, Msg: "tools: " + err.Error()}}
	}
	r := &Rule{
		Index: index, File: file, Line: d.exprLine, Message: d.message,
		tools: tools, patterns: slices.Compact(slices.Sorted(slices.Values(globs))), written: d.tools,
		deny: d.kind == keyDenyIf, expr: d.expr, message: d.message, prg: prg,
	}
	r.lookups = lookupsOf(ast.NativeRep().Expr())
	for _, ref := range ast.NativeRep().ReferenceMap() {
		// An iteration variable named like one of these is taken for it,
		// which errs on the side of reading more.
		r.reads |= variables[ref.Name]
	}
	if r.Message == "" {
		r.Message = defaultMessage(r)
	}
	return r, nil
}

// defaultMessage is what a caller refused by r is told when the rule has
// no message: the condition itself, which says what would pass.
func defaultMessage(r *Rule) string {
	if r.deny {
		return fmt.Sprintf("refused by policy rule %d, which refuses a call when %s", r.Index, r.expr)
	}
	return fmt.Sprintf("refused by policy rule %d, which allows a call only when %s", r.Index, r.expr)
}

// oneLine keeps an error message to one line, as a FILE:LINE report wants.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// sameMeaning reports whether r and q mean the same, wherever they are
// written.
func (r *Rule) sameMeaning(q *Rule) bool {
	return r.Index == q.Index && r.deny == q.deny && r.expr == q.expr && r.message == q.message &&
		slices.Equal(r.patterns, q.patterns)
}

// Rules returns the policy's rules in file order; none for a nil policy.
// The slice must not be modified.
func (p *Policy) Rules() []*Rule {
	if p == nil {
		return nil
	}
	return p.rules
}
