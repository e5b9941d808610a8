package catalog

import (
	"github.com/mcpmux/mcpmux/policy"
)

// The rules of a policy ([[rule]] tables, see package policy) govern tools
// only. A rule whose expression reads args is checked on each call, after
// its arguments are validated; a rule that does not read them decides the
// same for every call of a tool by one caller, so it also decides whether
// the caller sees the tool: a tool one of them refuses is not listed, and a
// call of it is refused as a call of an unknown name.

// Viewer is whose view of a list or a tool is asked about: an identity's
// policy and the caller's JWT claims (nil for any other credential).
type Viewer struct {
	Policy *policy.Policy
	Claims map[string]any
	// AnyCaller leaves out the rules that read claims: the policy's widest
	// view, which every caller's view is a part of, for telling whether a
	// change of the catalog can have changed any caller's view.
	AnyCaller bool
}

// Sees reports whether v may see and call e: the policy allows it and no
// rule that ignores the arguments refuses it.
func (v Viewer) Sees(e *Entry) bool {
	if !v.Policy.Allows(e.Item()) {
		return false
	}
	return e.Kind != KindTool || len(v.Policy.Rules()) == 0 || v.Refusal(e, Seeing, nil) == nil
}

// RuleStage is which of a policy's rules a question is about.
type RuleStage bool

const (
	// Seeing: the rules that ignore the arguments, which decide whether a
	// caller sees a tool (for a Viewer with AnyCaller, of those only the
	// ones that ignore claims too).
	Seeing RuleStage = false
	// Calling: the rules that read the arguments, which decide whether a
	// validated call may leave.
	Calling RuleStage = true
)

// Refusal returns the Refusal of the first rule of stage s that applies to
// t and refuses v the tool (a call of it with args, when calling), or nil.
func (v Viewer) Refusal(t *Tool, s RuleStage, args map[string]any) *policy.Refusal {
	var in *policy.Input
	for _, r := range v.Policy.Rules() {
		if r.ReadsArgs() != bool(s) || s == Seeing && v.AnyCaller && r.ReadsClaims() || !r.Applies(t.Name) {
			continue
		}
		if in == nil {
			in = &policy.Input{Args: args, Tool: t.Name, Server: t.Server, Claims: v.Claims}
		}
		if ref := r.Check(v.Policy.Identity, in); ref != nil {
			return ref
		}
	}
	return nil
}

// ReadsClaims reports whether some rule of p that ignores the arguments
// reads claims, so that callers of p's identity may see different lists.
func ReadsClaims(p *policy.Policy) bool {
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
func (c *Catalog) view(v Viewer) string {
	if v.AnyCaller || !ReadsClaims(v.Policy) {
		return ""
	}
	var (
		bits []byte
		n    int
		in   = policy.Input{Claims: v.Claims}
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
	for _, r := range v.Policy.Rules() {
		if r.ReadsArgs() || !r.ReadsClaims() {
			continue
		}
		if !r.ReadsTool() {
			add(r.Check(v.Policy.Identity, &in) != nil)
			continue
		}
		for _, e := range c.Kinds[KindTool].List {
			if r.Applies(e.Name) && v.Policy.Allows(e.Item()) {
				in.Tool, in.Server = e.Name, e.Server
				add(r.Check(v.Policy.Identity, &in) != nil)
			}
		}
		in.Tool, in.Server = "", ""
	}
	return string(bits)
}
