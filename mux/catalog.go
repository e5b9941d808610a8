package mux

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/glob"
)

// tool is one exposed tool: where it goes and how its arguments are checked.
// It is immutable once built.
type tool struct {
	name     string // exposed
	orig     string // the child's own name
	child    *child
	readOnly bool
	def      mcp.Tool // as listed upstream: the child's definition under the exposed name
	args     *argChecker
}

// childCatalog is what one child offers, built once per tools/list.
type childCatalog struct {
	tools  []*tool
	hidden []string // exposed forms of hidden tools, so the audit can say "hidden"
}

// catalog is the merged, immutable snapshot every call and list reads.
type catalog struct {
	tools  []*tool // config order of servers, then each child's order
	byName map[string]*tool
	hidden map[string]string // exposed form -> alias
	wire   []byte            // the tools as listed, to tell whether anything changed
}

var emptyCatalog = &catalog{byName: map[string]*tool{}, hidden: map[string]string{}}

// wireTool is a tool as a child lists it. Schemas stay raw: mcp-go's typed
// schema drops keywords such as oneOf and $schema.
type wireTool struct {
	Name         string             `json:"name"`
	Title        string             `json:"title,omitempty"`
	Description  string             `json:"description,omitempty"`
	InputSchema  json.RawMessage    `json:"inputSchema"`
	OutputSchema json.RawMessage    `json:"outputSchema,omitempty"`
	Annotations  mcp.ToolAnnotation `json:"annotations"`
	Meta         *mcp.Meta          `json:"_meta,omitempty"`
	Icons        []mcp.Icon         `json:"icons,omitempty"`
	Execution    *mcp.ToolExecution `json:"execution,omitempty"`
}

// buildChildCatalog turns a child's raw tool list into exposed tools. A tool
// that cannot be offered safely is left out and the log says why; it never
// fails the whole catalog.
func (m *Mux) buildChildCatalog(c *child, raw []json.RawMessage) *childCatalog {
	hide, _ := glob.CompileSet(c.cfg.Hide)         // validated with the config
	readOnly, _ := glob.CompileSet(c.cfg.ReadOnly) // likewise
	cat := &childCatalog{}
	seen := map[string]bool{}
	leftOut := map[string]string{}
	// skip logs a tool that is left out, once for as long as the reason holds.
	skip := func(name, why string, err error) {
		leftOut[name] = why
		if c.leftOut[name] != why {
			c.log.Warn().Str("child_tool", name).AnErr("error", err).Msg("tool left out: " + why)
		}
	}
	defer func() { c.leftOut = leftOut }()
	for i, r := range raw {
		var w wireTool
		if err := json.Unmarshal(r, &w); err != nil || w.Name == "" {
			skip(fmt.Sprintf("#%d", i), "not a valid tool definition", err)
			continue
		}
		log := c.log.With().Str("child_tool", w.Name).Logger()
		if seen[w.Name] {
			skip(w.Name+"#"+fmt.Sprint(i), "the server lists this name twice; the first definition is kept", nil)
			continue
		}
		seen[w.Name] = true
		if hide.Match(w.Name) {
			cat.hidden = append(cat.hidden, c.alias+m.cfg.Mux.Separator+sanitize(w.Name))
			log.Debug().Msg("tool hidden by config")
			continue
		}
		if w.Execution != nil && w.Execution.TaskSupport == mcp.TaskSupportRequired {
			skip(w.Name, "it can only run as a task, which mcpmux does not relay yet", nil)
			continue
		}
		if len(bytes.TrimSpace(w.InputSchema)) == 0 || bytes.Equal(bytes.TrimSpace(w.InputSchema), []byte("null")) {
			w.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		in, err := objectSchema(w.InputSchema)
		if err != nil {
			skip(w.Name, "its inputSchema is not an object schema", err)
			continue
		}
		w.InputSchema = in
		args, err := newArgChecker(w.InputSchema, m.cfg.Limits)
		if err != nil {
			skip(w.Name, schemaRefusal(err), err)
			continue
		}
		def := mcp.Tool{
			Title:          w.Title,
			Description:    w.Description,
			RawInputSchema: w.InputSchema,
			Annotations:    w.Annotations,
			Meta:           w.Meta,
			Icons:          w.Icons,
		}
		if len(w.OutputSchema) > 0 && !bytes.Equal(bytes.TrimSpace(w.OutputSchema), []byte("null")) {
			if out, err := objectSchema(w.OutputSchema); err != nil {
				// The tool still works; clients just cannot check its
				// structured content.
				log.Warn().Err(err).Msg("outputSchema left out: not an object schema")
			} else {
				def.RawOutputSchema = out
			}
		}
		if err := mcp.ValidateParamHeaderAnnotations(&def); err != nil {
			skip(w.Name, "invalid x-mcp-header annotations", err)
			continue
		}
		ro := readOnly.Match(w.Name) ||
			c.cfg.TrustAnnotations && w.Annotations.ReadOnlyHint != nil && *w.Annotations.ReadOnlyHint
		cat.tools = append(cat.tools, &tool{orig: w.Name, child: c, readOnly: ro, def: def, args: args})
	}
	// Named once the whole list is known, so that no tool's name depends on
	// where the child listed it.
	m.nameTools(c, cat.tools)
	return cat
}

// rebuildCatalog merges what every child lists now and, if the result
// differs from the current snapshot, publishes it. Upstream sessions then
// get notifications/tools/list_changed from mcp-go.
func (m *Mux) rebuildCatalog() {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	next := &catalog{byName: map[string]*tool{}, hidden: map[string]string{}}
	var wire bytes.Buffer
	for _, c := range m.children {
		listed := c.state.Load().listed
		if listed == nil {
			continue
		}
		for _, h := range listed.hidden {
			next.hidden[h] = c.alias
		}
		for _, t := range listed.tools {
			next.tools = append(next.tools, t)
			next.byName[t.name] = t
			b, err := json.Marshal(t.def)
			if err != nil {
				// Cannot happen for a definition built from decoded JSON; keep
				// the change visible rather than silently equal.
				b = []byte(fmt.Sprintf("%p", t))
			}
			wire.Write(b)
			fmt.Fprintf(&wire, "|%s|%t\n", t.orig, t.readOnly)
		}
	}
	next.wire = wire.Bytes()
	// The new snapshot is stored even when the tools are the same: it holds a
	// new child generation's schemas and the current hidden names.
	same := bytes.Equal(m.catalog.Load().wire, next.wire)
	m.catalog.Store(next)
	if same {
		// mcp-go's SetTools always announces a change, and its handlers
		// resolve the tool in the snapshot per call anyway.
		return
	}
	m.setServerTools(next)
	m.log.Info().Int("tools", len(next.tools)).Msg("catalog changed")
}

// setServerTools registers the snapshot's tools with the upstream server,
// which tells every session that the tool list changed.
func (m *Mux) setServerTools(cat *catalog) {
	entries := make([]server.ServerTool, 0, len(cat.tools))
	for _, t := range cat.tools {
		entries = append(entries, server.ServerTool{Tool: t.def, Handler: m.handleCall})
	}
	m.srv.SetTools(entries...)
}
