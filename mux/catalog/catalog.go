// Package catalog owns what the children offer as mcpmux exposes it: one
// child's catalog, built from the lists it read (Builder: each definition
// checked, named and given its arguments' checker), the merge of all of
// them into one immutable snapshot in config order (Merge, Seal), and what
// one caller sees of a snapshot under its identity's policy and rules
// (Viewer), with each view's list encoded once. It knows nothing of child
// processes or upstream sessions: an entry names its server by alias.
package catalog

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/pins"
	"github.com/mcpmux/mcpmux/policy"
)

// Kind is one of the things a child offers. Tools, prompts, resources and
// resource templates share one registry: the same entry type, naming,
// hiding, merging and policy question.
type Kind uint8

const (
	KindTool Kind = iota
	KindPrompt
	KindResource
	KindTemplate
	NumKinds
)

// KindWire says how a kind appears on the wire (the list method, the member
// of its result that holds the list, the member of each item that names it)
// and in the log.
var KindWire = [NumKinds]struct{ List, Member, Key, Label, LogKey, Noun string }{
	KindTool:     {string(mcp.MethodToolsList), "tools", "name", "tool", "child_tool", "name"},
	KindPrompt:   {string(mcp.MethodPromptsList), "prompts", "name", "prompt", "child_prompt", "name"},
	KindResource: {string(mcp.MethodResourcesList), "resources", "uri", "resource", "child_uri", "URI"},
	KindTemplate: {string(mcp.MethodResourcesTemplatesList), "resourceTemplates", "uriTemplate", "resource template", "child_uri_template", "template"},
}

// Entry is one exposed thing: what it is called upstream, where it goes, and
// its definition as listed upstream. It is immutable once built.
type Entry struct {
	Kind     Kind
	Name     string          // exposed: a name, a URI or a URI template
	Orig     string          // the child's own
	Server   string          // the alias of the server it comes from
	Def      json.RawMessage // the child's definition under the exposed name, otherwise as sent
	ReadOnly bool            // tools: safe to re-run
	Args     *args.Checker   // tools: checks arguments
	// Task is how a tool runs as a Task upstream: optional or required
	// when the child offers tasks for tools/call, "" otherwise.
	Task mcp.TaskSupport
	// bare is the form of an entry of a child with prefix = false; Prefixed
	// is its fallback, used when a server listed earlier exposes the same
	// name. Both are nil for a Prefixed child.
	Prefixed *Entry
	Tmpl     *naming.URITemplate // templates of a child with prefix = false: routes bare URIs
	// Pin is the digest of a tool's or prompt's definition, compared with
	// its pin (mcpmux's pinning); zero when pinning is off.
	Pin pins.Sum
	// HeaderTool is a tool whose parameters are annotated to travel in
	// HTTP headers too (x-mcp-header), as mcp-go reads it, for checking a
	// 2026-07-28 request's headers; nil for any other tool.
	HeaderTool *mcp.Tool
}

// Tool is the entry kind the call pipeline works with.
type Tool = Entry

// Item is the policy's view of e.
func (e *Entry) Item() policy.Item {
	it := policy.Item{Name: e.Name, Server: e.Server, ReadOnly: e.ReadOnly}
	switch e.Kind {
	case KindTool:
		it.Kind = policy.Tool
	case KindPrompt:
		it.Kind = policy.Prompt
	default:
		it.Kind = policy.Resource
	}
	return it
}

// ChildCatalog is what one child offers, built once per read of its lists.
type ChildCatalog struct {
	Entries [NumKinds][]*Entry
	Hidden  []string // exposed forms of hidden tools and prompts, so the audit can say "hidden"
	Caps    mcp.ServerCapabilities
	// Instructions are the child's, from its initialize answer.
	Instructions string
	// Digests is the pin digest of each tool and prompt by its own name,
	// under pinning only (stillPinned).
	Digests map[OwnName]pins.Sum

	search searchIndex // its tools for find_tools (search.go)
}

// OwnName is a tool or prompt by the name its child gives it.
type OwnName struct {
	Kind Kind
	Orig string
}

// Tools returns the child's Tools.
func (cc *ChildCatalog) Tools() []*Entry { return cc.Entries[KindTool] }

// section is one kind's part of the merged catalog.
type section struct {
	List   []*Entry // config order of servers, then each child's order
	ByName map[string]*Entry
}

// Catalog is the merged, immutable snapshot every call and list reads.
type Catalog struct {
	Kinds  [NumKinds]section
	Hidden map[string]string // exposed form -> alias
	// wire is a digest of each kind as listed (definitions, owners,
	// read-only marks, task support), to tell whether anything changed.
	wire [NumKinds][sha256.Size]byte
	// Caps is what the children together offer, for the upstream initialize.
	Caps mcp.ServerCapabilities
	// Instructions are the children's that have any, in config order.
	Instructions []Instructions
	// children are the catalogs merged, in config order, whose search
	// indexes Search ranks over.
	children []*ChildCatalog
	// lists caches each kind's list as one identity's policy sees it
	// (*listing), keyed by listKey: built on first use, dropped with the
	// snapshot.
	lists sync.Map
	// views counts, per policy (*atomic.Int32), the claims views lists
	// holds for it, which maxViews bounds.
	views sync.Map
}

// MaxViews bounds how many claims views of one policy a snapshot keeps
// lists for: the views are as many as the callers' claims make them (up to
// 2^bits, see Catalog.view), and each keeps a list. A view beyond them is
// listed afresh on every request.
const MaxViews = 64

// Listing is a list as one view sees it: its entries, for pages, and the
// whole list encoded.
type Listing struct {
	Entries []*Entry
	Encoded []byte
}

type listKey struct {
	kind   Kind
	policy *policy.Policy
	// view is what the rules that read claims decide for the caller
	// (Catalog.view); anyCaller is Viewer's.
	view      string
	anyCaller bool
}

var Empty = New()

func New() *Catalog {
	c := &Catalog{Hidden: map[string]string{}}
	for k := range c.Kinds {
		c.Kinds[k].ByName = map[string]*Entry{}
	}
	return c
}

// Lookup returns the entry of kind k exposed as name.
func (c *Catalog) Lookup(k Kind, name string) (*Entry, bool) {
	e, ok := c.Kinds[k].ByName[name]
	return e, ok
}

// Visible returns the entries of kind k that v sees, in catalog order.
func (c *Catalog) Visible(k Kind, v Viewer) []*Entry {
	var out []*Entry
	for _, e := range c.Kinds[k].List {
		if v.Sees(e) {
			out = append(out, e)
		}
	}
	return out
}

// List returns the JSON array of the definitions of kind k that v sees,
// encoded once per snapshot, policy and view of its rules.
func (c *Catalog) List(k Kind, v Viewer) []byte { return c.Listed(k, v).Encoded }

// Listed returns the entries of kind k that v sees and their encoding, kept
// with the snapshot for each policy and each of its first maxViews claims
// views.
func (c *Catalog) Listed(k Kind, v Viewer) *Listing {
	key := listKey{kind: k, policy: v.Policy, anyCaller: v.AnyCaller}
	if k == KindTool {
		key.view = c.view(v)
	}
	if l, ok := c.lists.Load(key); ok {
		return l.(*Listing)
	}
	entries := c.Visible(k, v)
	l := &Listing{Entries: entries, Encoded: EncodeEntries(entries)}
	if key.view != "" && !c.roomForView(v.Policy) {
		return l
	}
	// Two requests may both have built it; every caller gets the one kept.
	kept, _ := c.lists.LoadOrStore(key, l)
	return kept.(*Listing)
}

// roomForView reports whether one more claims view of p may be kept, and
// counts it if so. Two requests building one view at once may both count
// it, which leaves room for fewer, never more.
func (c *Catalog) roomForView(p *policy.Policy) bool {
	n, ok := c.views.Load(p)
	if !ok {
		n, _ = c.views.LoadOrStore(p, new(atomic.Int32))
	}
	views := n.(*atomic.Int32)
	return views.Load() < MaxViews && views.Add(1) <= MaxViews
}

// Encode returns the JSON array of the definitions of kind k that v sees,
// without keeping it: for comparing with a policy no longer live.
func (c *Catalog) Encode(k Kind, v Viewer) []byte {
	return EncodeEntries(c.Visible(k, v))
}

// EncodeEntries returns the JSON array of the entries' definitions.
func EncodeEntries(entries []*Entry) []byte {
	n := 2 + len(entries)
	for _, e := range entries {
		n += len(e.Def)
	}
	b := make([]byte, 0, n) // kept with the snapshot: no spare capacity
	b = append(b, '[')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.Def...)
	}
	return append(b, ']')
}

// wireFields are the members of a listed item, spelled exactly, that
// mcpmux, mcp-go or a client reads; annotationFields those of a tool's
// annotations.
var (
	wireFields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations",
		"execution", "arguments", "uri", "uriTemplate", "mimeType", "size", "icons", "_meta"}
	annotationFields = []string{"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
)

const TaskOnly = "it can only run as a task, and the server does not declare tasks for tools/call"

// Instructions are one child's instructions, under its alias.
type Instructions struct{ Alias, Text string }

// mergeCaps adds what one child declared to the union in into.
func mergeCaps(into *mcp.ServerCapabilities, c mcp.ServerCapabilities) {
	if c.Logging != nil {
		into.Logging = &struct{}{}
	}
	if c.Completions != nil {
		into.Completions = &struct{}{}
	}
	if c.Prompts != nil && into.Prompts == nil {
		into.Prompts = &struct {
			ListChanged bool `json:"listChanged,omitempty"`
		}{}
	}
	if c.Resources != nil {
		if into.Resources == nil {
			into.Resources = &struct {
				Subscribe   bool `json:"subscribe,omitempty"`
				ListChanged bool `json:"listChanged,omitempty"`
			}{}
		}
		into.Resources.Subscribe = into.Resources.Subscribe || c.Resources.Subscribe
	}
	if t := ToolTasks(c); t != nil {
		into.Tasks = t
	}
}

// Match reports whether uri is an expansion of the template entry e.
func (e *Entry) Match(uri string) bool {
	return e.Tmpl != nil && e.Tmpl.Match(uri)
}

// ToolTasks is what the mux declares of tasks for a child that declared
// caps: tasks for tools/call, with tasks/list and tasks/cancel (mcp-go's
// store answers those), when the child runs tools/call as tasks; nil
// otherwise. No other request crosses as a task.
func ToolTasks(caps mcp.ServerCapabilities) *mcp.TasksCapability {
	t := caps.Tasks
	if t == nil || t.Requests == nil || t.Requests.Tools == nil || t.Requests.Tools.Call == nil {
		return nil
	}
	out := mcp.NewTasksCapabilityWithToolsOnly()
	out.List, out.Cancel = &struct{}{}, &struct{}{}
	return out
}

// Part is one child's catalog, to be merged: its alias, what it lists and
// where what the merge leaves out of it is logged.
type Part struct {
	Alias  string
	Listed *ChildCatalog
	Log    zerolog.Logger
}

// Merge merges the children's catalogs in the order given (the config's):
// where two expose the same name, the one listed first keeps it, and the
// other's entry is exposed under its prefixed name or left out. The result
// is not sealed: pins may still hold entries back (seal).
func Merge(parts []Part) *Catalog {
	next := New()
	owner := map[string]string{} // exposed name -> alias, per kind, for collisions
	for _, p := range parts {
		listed := p.Listed
		next.children = append(next.children, listed)
		mergeCaps(&next.Caps, listed.Caps)
		if listed.Instructions != "" {
			next.Instructions = append(next.Instructions, Instructions{Alias: p.Alias, Text: listed.Instructions})
		}
		for _, h := range listed.Hidden {
			next.Hidden[h] = p.Alias
		}
		for k := range NumKinds {
			sec := &next.Kinds[k]
			for _, e := range listed.Entries[k] {
				key := string(rune('0'+k)) + e.Name
				if first, taken := owner[key]; taken {
					if e.Prefixed == nil {
						p.Log.Warn().Str("kind", KindWire[k].Label).Str("exposed", e.Name).Str("kept_by", first).
							Msg("left out: a server listed earlier exposes the same name")
						continue
					}
					p.Log.Info().Str("kind", KindWire[k].Label).Str("exposed", e.Prefixed.Name).Str("bare_kept_by", first).
						Msg("exposed under its prefixed name: a server listed earlier exposes the bare one")
					e = e.Prefixed
					key = string(rune('0'+k)) + e.Name
					if _, taken := owner[key]; taken {
						continue
					}
				}
				owner[key] = p.Alias
				sec.List = append(sec.List, e)
				sec.ByName[e.Name] = e
			}
		}
	}
	return next
}

// Seal computes c's digests of each kind as listed, which changedKinds
// compares; c is not changed after.
func (c *Catalog) Seal() {
	for k := range NumKinds {
		if len(c.Kinds[k].List) == 0 {
			continue // the zero digest, as in Empty
		}
		h := sha256.New()
		for _, e := range c.Kinds[k].List {
			h.Write(e.Def)
			fmt.Fprintf(h, "|%s|%s|%t|%s\n", e.Server, e.Orig, e.ReadOnly, e.Task)
		}
		h.Sum(c.wire[k][:0])
	}
}

// ChangedKinds returns the kinds whose lists differ between two catalogs.
func ChangedKinds(prev, next *Catalog) []Kind {
	var changed []Kind
	for k := range NumKinds {
		if prev.wire[k] != next.wire[k] {
			changed = append(changed, k)
		}
	}
	return changed
}

var AllKinds = []Kind{KindTool, KindPrompt, KindResource, KindTemplate}

// Cached reports how many lists c keeps for the policy p.
func (c *Catalog) Cached(p *policy.Policy) int {
	n := 0
	c.lists.Range(func(k, _ any) bool {
		if k.(listKey).policy == p {
			n++
		}
		return true
	})
	return n
}
