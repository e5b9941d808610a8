package mux

import (
	"github.com/mcpmux/mcpmux/policy"
)

// The rules of a policy ([[rule]] tables, see package policy) govern tools
// only. A rule whose expression reads args is checked on each call, after
// its arguments are validated; a rule that does not read them decides the
// same for every call of a tool by one caller, so it also decides whether
// the caller sees the tool: a tool one of them refuses is not listed, and a
// call of it is refused as a call of an unknown name.

// viewer is whose view of a list or a tool is asked about: an identity's
// policy and the caller's JWT claims (nil for any other credential).
type viewer struct {
	p      *policy.Policy
	claims map[string]any
	// anyCaller leaves out the rules that read claims: the policy's widest
	// view, which every caller's view is a part of, for telling whether a
	// change of the catalog can have changed any caller's view.
	anyCaller bool
}

// sees reports whether v may see and call e: the policy allows it and no
// rule that ignores the arguments refuses it.
func (v viewer) sees(e *entry) bool {
	if !v.p.Allows(e.item()) {
		return false
	}
	return e.kind != kindTool || len(v.p.Rules()) == 0 || v.refusal(e, seeing, nil) == nil
}

// ruleStage is which of a policy's rules a question is about.
type ruleStage bool

const (
	// seeing: the rules that ignore the arguments, which decide whether a
	// caller sees a tool (for a viewer with anyCaller, of those only the
	// ones that ignore claims too).
	seeing ruleStage = false
	// calling: the rules that read the arguments, which decide whether a
	// validated call may leave.
	calling ruleStage = true
)

// refusal returns the refusal of the first rule of stage s that applies to
// t and refuses v the tool (a call of it with args, when calling), or nil.
func (v viewer) refusal(t *tool, s ruleStage, args map[string]any) *policy.Refusal {
	var in *policy.Input
	for _, r := range v.p.Rules() {
		if r.ReadsArgs() != bool(s) || s == seeing && v.anyCaller && r.ReadsClaims() || !r.Applies(t.name) {
			continue
		}
		if in == nil {
			in = &policy.Input{Args: args, Tool: t.name, Server: t.server, Claims: v.claims}
		}
		if ref := r.Check(v.p.Identity, in); ref != nil {
			return ref
		}
	}
	return nil
}

// readsClaims reports whether some rule of p that ignores the arguments
// reads claims, so that callers of p's identity may see different lists.
func readsClaims(p *policy.Policy) bool {
	for _, r := range p.Rules() {
		if !r.ReadsArgs() && r.ReadsClaims() {
			return true
		}
	}
	return false
}

// view returns what the rules that read claims decide for v over the tools
// of c, one bit each, as a key of c's list cache: callers with the same
// view see the same list. It is "" when no rule reads claims, the same for
// every caller. A rule that reads tool or server is one bit for each tool
// of the policy it applies to, any other one bit in all.
//
// It is computed once per list request, cached or not: the claims are the
// caller's, so what the rules decide for them cannot be looked up. Its cost
// is one evaluation per rule that reads claims, and for one that reads tool
// or server too, one per tool it applies to; that much is inherent in such
// a rule, which decides tool by tool for each caller.
func (c *catalog) view(v viewer) string {
	if v.anyCaller || !readsClaims(v.p) {
		return ""
	}
	var (
		bits []byte
		n    int
		in   = policy.Input{Claims: v.claims}
	)
	add := func(refused bool) {
		if n%8 == 0 {
			bits = append(bits, 0)
		}
		if refused {
			bits[n/8] |= 1 << (n % 8)
		}
		n++
	}
	for _, r := range v.p.Rules() {
		if r.ReadsArgs() || !r.ReadsClaims() {
			continue
		}
		if !r.ReadsTool() {
			add(r.Check(v.p.Identity, &in) != nil)
			continue
		}
		for _, e := range c.kinds[kindTool].list {
			if r.Applies(e.name) && v.p.Allows(e.item()) {
				in.Tool, in.Server = e.name, e.server
				add(r.Check(v.p.Identity, &in) != nil)
			}
		}
		in.Tool, in.Server = "", ""
	}
	return string(bits)
}
