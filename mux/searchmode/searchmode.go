// Package searchmode owns mcpmux's search mode: which callers see the
// catalog through two tools of mcpmux's own instead of listed whole, what
// those tools are, and what find_tools answers. A call through call_tool
// is the pipeline's, as a direct call of the tool it names.
package searchmode

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/policy"
)

// Bounds of find_tools' limit.
const (
	DefaultLimit = 5
	MaxLimit     = 20
)

// Searching reports whether a caller of policy p, who may call visible()
// tools, is in search mode under the config's mode and threshold.
func Searching(mode string, above int, p *policy.Policy, visible func() int) bool {
	if m := p.Catalog(); m != "" {
		mode = m
	}
	switch mode {
	case config.CatalogSearch:
		return true
	case config.CatalogAuto:
		return visible() > above
	}
	return false
}

// Tools are mcpmux's own two tools under one separator.
type Tools struct {
	Find, Call string // exposed names: mcpmux__find_tools, mcpmux__call_tool
	defs       []byte // both definitions, a JSON array's members
	// tasks is defs with call_tool's execution.taskSupport "optional": the
	// list of a caller who may call a tool that runs as a task.
	tasks []byte
}

// For returns the own tools named with sep, "_" or "__" (config's
// separator): built once for each.
func For(sep string) *Tools {
	if sep == "_" {
		return single()
	}
	return double()
}

var (
	single = sync.OnceValue(func() *Tools { return NewTools("_") })
	double = sync.OnceValue(func() *Tools { return NewTools("__") })
)

// NewTools returns the own tools named with sep.
func NewTools(sep string) *Tools {
	t := &Tools{Find: config.ReservedAlias + sep + "find_tools", Call: config.ReservedAlias + sep + "call_tool"}
	find := fmt.Sprintf(`{"name":%q,"title":"Find tools","description":%q,"inputSchema":%s,"outputSchema":%s,"annotations":{"readOnlyHint":true,"idempotentHint":true,"openWorldHint":false}}`,
		t.Find, "Find the tools you may call, on every server behind mcpmux, by what you want done. "+
			"Returns the best matches, best first, each with its name, description and input schema; call one with "+t.Call+".",
		fmt.Sprintf(`{"type":"object","properties":{"query":{"type":"string","description":"What you want done, in a few words, for example \"create an issue\" or \"read a file\""},`+
			`"limit":{"type":"integer","minimum":1,"maximum":%d,"description":"How many tools to return; %d when not given"},`+
			`"server":{"type":"string","description":"Only this server's tools: its alias, the start of its tools' names"}},"required":["query"]}`, MaxLimit, DefaultLimit),
		`{"type":"object","properties":{"tools":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},"inputSchema":{"type":"object"},"outputSchema":{"type":"object"},"annotations":{"type":"object"},"execution":{"type":"object"}},"required":["name","inputSchema"]}}},"required":["tools"]}`)
	call := fmt.Sprintf(`{"name":%q,"title":"Call a tool","description":%q,"inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The tool's name, as %s gave it"},"arguments":{"type":"object","description":"The tool's arguments, as its input schema says"}},"required":["name"]}`,
		t.Call, "Call a tool that "+t.Find+" found, by its name, with arguments as its input schema says. "+
			"It does exactly what calling the tool directly does.", t.Find)
	t.defs = []byte(find + "," + call + "}")
	t.tasks = []byte(find + "," + call + `,"execution":{"taskSupport":"optional"}}`)
	return t
}

// Own reports whether name is one of the two tools.
func (t *Tools) Own(name string) bool { return name == t.Find || name == t.Call }

// List is the tools array of a tools/list in search mode: the two tools,
// then those of listed (what the caller may call) that p lists always.
// call_tool's execution.taskSupport is "optional" when a tool of listed
// may run as a task (a task-augmented call_tool of it is that tool's
// task-augmented call, tasks.Route; one of another tool is answered as a
// direct task-augmented call of it is), and absent otherwise.
func (t *Tools) List(listed []*catalog.Entry, p *policy.Policy) []byte {
	defs := t.defs
	if slices.ContainsFunc(listed, func(e *catalog.Entry) bool { return e.Task != "" }) {
		defs = t.tasks
	}
	out := append([]byte{'['}, defs...)
	for _, e := range Always(listed, p) {
		out = append(out, ',')
		out = append(out, e.Def...)
	}
	return append(out, ']')
}

// Always are the entries of listed that search mode lists besides the two
// tools.
func Always(listed []*catalog.Entry, p *policy.Policy) []*catalog.Entry {
	var out []*catalog.Entry
	if p.HasAlways() {
		for _, e := range listed {
			if p.Always(e.Name) {
				out = append(out, e)
			}
		}
	}
	return out
}

// ErrArguments is a call of one of the tools with arguments it does not
// take; the message says which.
var ErrArguments = errors.New("invalid arguments")

// Query is a find_tools call's arguments.
type Query struct {
	Query  string `json:"query"`
	Limit  int    `json:"limit"`
	Server string `json:"server"`
}

// ParseQuery reads find_tools' arguments.
func ParseQuery(args json.RawMessage) (Query, error) {
	var q Query
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &q); err != nil {
			return q, fmt.Errorf("%w: %v", ErrArguments, err)
		}
	}
	switch {
	case strings.TrimSpace(q.Query) == "":
		return q, fmt.Errorf("%w: query is required: say in a few words what you want done", ErrArguments)
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 1 || q.Limit > MaxLimit:
		return q, fmt.Errorf("%w: limit must be between 1 and %d, not %d", ErrArguments, MaxLimit, q.Limit)
	}
	return q, nil
}

// Found is find_tools' result: the tools as structuredContent, and as
// its text for clients that read only content.
func Found(found []*catalog.Entry) []byte {
	tools := make([]json.RawMessage, 0, len(found))
	for _, e := range found {
		tools = append(tools, summary(e.Def))
	}
	structured, _ := json.Marshal(map[string]any{"tools": tools})
	text, _ := json.Marshal(string(structured))
	out := []byte(`{"content":[{"type":"text","text":`)
	out = append(out, text...)
	out = append(out, `}],"structuredContent":`...)
	out = append(out, structured...)
	return append(out, '}')
}

// summary is what find_tools tells of a tool: the members of its
// definition a caller needs to call it.
func summary(def json.RawMessage) json.RawMessage {
	var all map[string]json.RawMessage
	if json.Unmarshal(def, &all) != nil {
		return def
	}
	keep := map[string]json.RawMessage{}
	for _, k := range []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations", "execution"} {
		if v, ok := all[k]; ok {
			keep[k] = v
		}
	}
	b, err := json.Marshal(keep)
	if err != nil {
		return def
	}
	return b
}

// Target is what a call_tool call names: the tool and its arguments.
type Target struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ParseTarget reads call_tool's arguments.
func (t *Tools) ParseTarget(args json.RawMessage) (Target, error) {
	var c Target
	if err := json.Unmarshal(args, &c); err != nil || c.Name == "" {
		return c, fmt.Errorf("%w: name is required: the name of a tool %s found", ErrArguments, t.Find)
	}
	if t.Own(c.Name) {
		return c, fmt.Errorf("%w: %s calls a tool of a server, not %s itself", ErrArguments, t.Call, c.Name)
	}
	if len(c.Arguments) > 0 && c.Arguments[0] != '{' && string(c.Arguments) != "null" {
		return c, fmt.Errorf("%w: arguments must be an object", ErrArguments)
	}
	return c, nil
}
