package mux

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/naming"
	"github.com/mcpmux/mcpmux/pins"
	"github.com/mcpmux/mcpmux/policy"
)

// kind is one of the things a child offers. Tools, prompts, resources and
// resource templates share one registry: the same entry type, naming,
// hiding, merging and policy question.
type kind uint8

const (
	kindTool kind = iota
	kindPrompt
	kindResource
	kindTemplate
	numKinds
)

// kindWire says how a kind appears on the wire (the list method, the member
// of its result that holds the list, the member of each item that names it)
// and in the log.
var kindWire = [numKinds]struct{ list, member, key, label, logKey, noun string }{
	kindTool:     {string(mcp.MethodToolsList), "tools", "name", "tool", "child_tool", "name"},
	kindPrompt:   {string(mcp.MethodPromptsList), "prompts", "name", "prompt", "child_prompt", "name"},
	kindResource: {string(mcp.MethodResourcesList), "resources", "uri", "resource", "child_uri", "URI"},
	kindTemplate: {string(mcp.MethodResourcesTemplatesList), "resourceTemplates", "uriTemplate", "resource template", "child_uri_template", "template"},
}

// entry is one exposed thing: what it is called upstream, where it goes, and
// its definition as listed upstream. It is immutable once built.
type entry struct {
	kind     kind
	name     string          // exposed: a name, a URI or a URI template
	orig     string          // the child's own
	server   string          // the alias of the server it comes from
	def      json.RawMessage // the child's definition under the exposed name, otherwise as sent
	readOnly bool            // tools: safe to re-run
	args     *args.Checker   // tools: checks arguments
	// task is how a tool runs as a task upstream: optional or required
	// when the child offers tasks for tools/call, "" otherwise.
	task mcp.TaskSupport
	// bare is the form of an entry of a child with prefix = false; prefixed
	// is its fallback, used when a server listed earlier exposes the same
	// name. Both are nil for a prefixed child.
	prefixed *entry
	tmpl     *naming.URITemplate // templates of a child with prefix = false: routes bare URIs
	// pin is the digest of a tool's or prompt's definition, compared with
	// its pin (pinning.go); zero when pinning is off.
	pin pins.Sum
	// headerTool is a tool whose parameters are annotated to travel in
	// HTTP headers too (x-mcp-header), as mcp-go reads it, for checking a
	// 2026-07-28 request's headers; nil for any other tool.
	headerTool *mcp.Tool
}

// tool is the entry kind the call pipeline works with.
type tool = entry

// item is the policy's view of e.
func (e *entry) item() policy.Item {
	it := policy.Item{Name: e.name, Server: e.server, ReadOnly: e.readOnly}
	switch e.kind {
	case kindTool:
		it.Kind = policy.Tool
	case kindPrompt:
		it.Kind = policy.Prompt
	default:
		it.Kind = policy.Resource
	}
	return it
}

// childCatalog is what one child offers, built once per read of its lists.
type childCatalog struct {
	entries [numKinds][]*entry
	hidden  []string // exposed forms of hidden tools and prompts, so the audit can say "hidden"
	caps    mcp.ServerCapabilities
	// instructions are the child's, from its initialize answer.
	instructions string
	// digests is the pin digest of each tool and prompt by its own name,
	// under pinning only (stillPinned).
	digests map[ownName]pins.Sum
}

// ownName is a tool or prompt by the name its child gives it.
type ownName struct {
	kind kind
	orig string
}

// tools returns the child's tools.
func (cc *childCatalog) tools() []*entry { return cc.entries[kindTool] }

// section is one kind's part of the merged catalog.
type section struct {
	list   []*entry // config order of servers, then each child's order
	byName map[string]*entry
}

// catalog is the merged, immutable snapshot every call and list reads.
type catalog struct {
	kinds  [numKinds]section
	hidden map[string]string // exposed form -> alias
	// wire is a digest of each kind as listed (definitions, owners,
	// read-only marks, task support), to tell whether anything changed.
	wire [numKinds][sha256.Size]byte
	// caps is what the children together offer, for the upstream initialize.
	caps mcp.ServerCapabilities
	// instructions are the children's that have any, in config order.
	instructions []childInstructions
	// lists caches each kind's list as one identity's policy sees it
	// (*listing), keyed by listKey: built on first use, dropped with the
	// snapshot.
	lists sync.Map
	// views counts, per policy (*atomic.Int32), the claims views lists
	// holds for it, which maxViews bounds.
	views sync.Map
}

// maxViews bounds how many claims views of one policy a snapshot keeps
// lists for: the views are as many as the callers' claims make them (up to
// 2^bits, see catalog.view), and each keeps a list. A view beyond them is
// listed afresh on every request.
const maxViews = 64

// listing is a list as one view sees it: its entries, for pages, and the
// whole list encoded.
type listing struct {
	entries []*entry
	encoded []byte
}

type listKey struct {
	kind   kind
	policy *policy.Policy
	// view is what the rules that read claims decide for the caller
	// (catalog.view); anyCaller is viewer's.
	view      string
	anyCaller bool
}

var emptyCatalog = newCatalog()

func newCatalog() *catalog {
	c := &catalog{hidden: map[string]string{}}
	for k := range c.kinds {
		c.kinds[k].byName = map[string]*entry{}
	}
	return c
}

// lookup returns the entry of kind k exposed as name.
func (c *catalog) lookup(k kind, name string) (*entry, bool) {
	e, ok := c.kinds[k].byName[name]
	return e, ok
}

// visible returns the entries of kind k that v sees, in catalog order.
func (c *catalog) visible(k kind, v viewer) []*entry {
	var out []*entry
	for _, e := range c.kinds[k].list {
		if v.sees(e) {
			out = append(out, e)
		}
	}
	return out
}

// list returns the JSON array of the definitions of kind k that v sees,
// encoded once per snapshot, policy and view of its rules.
func (c *catalog) list(k kind, v viewer) []byte { return c.listed(k, v).encoded }

// listed returns the entries of kind k that v sees and their encoding, kept
// with the snapshot for each policy and each of its first maxViews claims
// views.
func (c *catalog) listed(k kind, v viewer) *listing {
	key := listKey{kind: k, policy: v.p, anyCaller: v.anyCaller}
	if k == kindTool {
		key.view = c.view(v)
	}
	if l, ok := c.lists.Load(key); ok {
		return l.(*listing)
	}
	entries := c.visible(k, v)
	l := &listing{entries: entries, encoded: encodeEntries(entries)}
	if key.view != "" && !c.roomForView(v.p) {
		return l
	}
	// Two requests may both have built it; every caller gets the one kept.
	kept, _ := c.lists.LoadOrStore(key, l)
	return kept.(*listing)
}

// roomForView reports whether one more claims view of p may be kept, and
// counts it if so. Two requests building one view at once may both count
// it, which leaves room for fewer, never more.
func (c *catalog) roomForView(p *policy.Policy) bool {
	n, ok := c.views.Load(p)
	if !ok {
		n, _ = c.views.LoadOrStore(p, new(atomic.Int32))
	}
	views := n.(*atomic.Int32)
	return views.Load() < maxViews && views.Add(1) <= maxViews
}

// encode returns the JSON array of the definitions of kind k that v sees,
// without keeping it: for comparing with a policy no longer live.
func (c *catalog) encode(k kind, v viewer) []byte {
	return encodeEntries(c.visible(k, v))
}

// encodeEntries returns the JSON array of the entries' definitions.
func encodeEntries(entries []*entry) []byte {
	n := 2 + len(entries)
	for _, e := range entries {
		n += len(e.def)
	}
	b := make([]byte, 0, n) // kept with the snapshot: no spare capacity
	b = append(b, '[')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.def...)
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

const taskOnly = "it can only run as a task, and the server does not declare tasks for tools/call"

// rebuildCatalog merges what every child lists now and publishes it; the
// announcer then tells each upstream session whose view changed.
func (m *Mux) rebuildCatalog() { m.rebuildCatalogThen(nil) }

// rebuildCatalogThen is rebuildCatalog, calling published (if not nil)
// once the new snapshot is published and mcp-go and the sessions are told,
// on the announcer's goroutine. The build's first-sight pins are written to
// the pin file after publishMu is let go, as is reading the pins' fields
// for a log line.
func (m *Mux) rebuildCatalogThen(published func()) {
	m.publishMu.Lock()
	work := m.publishCatalog(published)
	if m.pinning == nil {
		m.publishMu.Unlock()
		return
	}
	m.pinning.io.Lock()
	m.publishMu.Unlock()
	defer m.pinning.io.Unlock()
	work.do(m)
}

// publishCatalog builds the catalog and publishes it, under publishMu; it
// returns the pin file work left (applyPins).
func (m *Mux) publishCatalog(published func()) pinWork {
	next := newCatalog()
	owner := map[string]string{} // exposed name -> alias, per kind, for collisions
	for _, c := range m.children {
		listed := c.state.Load().listed
		if listed == nil {
			continue
		}
		mergeCaps(&next.caps, listed.caps)
		if listed.instructions != "" {
			next.instructions = append(next.instructions, childInstructions{alias: c.alias, text: listed.instructions})
		}
		for _, h := range listed.hidden {
			next.hidden[h] = c.alias
		}
		for k := range numKinds {
			sec := &next.kinds[k]
			for _, e := range listed.entries[k] {
				key := string(rune('0'+k)) + e.name
				if first, taken := owner[key]; taken {
					if e.prefixed == nil {
						c.log.Warn().Str("kind", kindWire[k].label).Str("exposed", e.name).Str("kept_by", first).
							Msg("left out: a server listed earlier exposes the same name")
						continue
					}
					c.log.Info().Str("kind", kindWire[k].label).Str("exposed", e.prefixed.name).Str("bare_kept_by", first).
						Msg("exposed under its prefixed name: a server listed earlier exposes the bare one")
					e = e.prefixed
					key = string(rune('0'+k)) + e.name
					if _, taken := owner[key]; taken {
						continue
					}
				}
				owner[key] = c.alias
				sec.list = append(sec.list, e)
				sec.byName[e.name] = e
			}
		}
	}
	work := m.applyPins(next)
	for k := range numKinds {
		if len(next.kinds[k].list) == 0 {
			continue // the zero digest, as in emptyCatalog
		}
		h := sha256.New()
		for _, e := range next.kinds[k].list {
			h.Write(e.def)
			fmt.Fprintf(h, "|%s|%s|%t|%s\n", e.server, e.orig, e.readOnly, e.task)
		}
		h.Sum(next.wire[k][:0])
	}
	prev := m.catalog.Load()
	// The new snapshot is stored even when nothing listed changed: it holds
	// a new child generation's schemas and the current hidden names.
	m.catalog.Store(next)
	if len(changedKinds(prev, next)) > 0 {
		m.log.Info().Int("tools", len(next.kinds[kindTool].list)).Int("prompts", len(next.kinds[kindPrompt].list)).
			Int("resources", len(next.kinds[kindResource].list)).Int("resource_templates", len(next.kinds[kindTemplate].list)).
			Msg("catalog changed")
	}
	m.announcer.changed(published)
	return work
}

// childInstructions are one child's instructions, under its alias.
type childInstructions struct{ alias, text string }

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
	if t := toolTasks(c); t != nil {
		into.Tasks = t
	}
}

// registerWithServer tells mcp-go the tools of the snapshot that may run
// as tasks, so that it creates the tasks of a 2025-11-25 client's
// task-augmented calls of them and runs handleTask for each. Every other
// request naming a tool mcpmux answers itself, from the snapshot.
func (m *Mux) registerWithServer(cat *catalog) {
	var tools []server.ServerTool
	for _, e := range cat.kinds[kindTool].list {
		if e.task == "" {
			continue
		}
		tools = append(tools, server.ServerTool{
			Tool:    mcp.Tool{Name: e.name, InputSchema: mcp.ToolInputSchema{Type: "object"}, Execution: execution(e.task)},
			Handler: m.handleTask,
		})
	}
	m.srv.SetTools(tools...)
}

// match reports whether uri is an expansion of the template entry e.
func (e *entry) match(uri string) bool {
	return e.tmpl != nil && e.tmpl.Match(uri)
}

// toolTasks is what the mux declares of tasks for a child that declared
// caps: tasks for tools/call, with tasks/list and tasks/cancel (mcp-go's
// store answers those), when the child runs tools/call as tasks; nil
// otherwise. No other request crosses as a task.
func toolTasks(caps mcp.ServerCapabilities) *mcp.TasksCapability {
	t := caps.Tasks
	if t == nil || t.Requests == nil || t.Requests.Tools == nil || t.Requests.Tools.Call == nil {
		return nil
	}
	out := mcp.NewTasksCapabilityWithToolsOnly()
	out.List, out.Cancel = &struct{}{}, &struct{}{}
	return out
}

// execution is the Execution of a tool's stub registered with mcp-go,
// which decides whether a task-augmented call runs as a task.
func execution(task mcp.TaskSupport) *mcp.ToolExecution {
	if task == "" {
		return nil
	}
	return &mcp.ToolExecution{TaskSupport: task}
}
