package testsupport

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// PinLab is a lab whose one labserver, "docs", also offers the tools and
// prompts of a LAB_DEFS file the test rewrites, and records every request
// it receives.
type PinLab struct {
	*Lab
	Defs     string // the LAB_DEFS file
	Requests string // LAB_REQUESTS: what reached the child
	PinFile  string
	// FailStart is LAB_FAIL_INIT_FILE: while it exists the child fails
	// every start.
	FailStart string
}

// PinDefs are what a PinLab's child defines besides its own tools: one
// tool "pinned" and one prompt "pinprompt" (or PromptName), each with a description and
// the tool with annotations and a schema.
type PinDefs struct {
	Description  string
	ReadOnlyHint bool
	Schema       string // the tool's inputSchema; a default one when ""
	PromptDesc   string
	PromptName   string // the prompt's name; "pinprompt" when ""
	ExtraTool    string // a second tool's name, when not ""
	// ToolMeta is the tool's _meta, PromptIcon the src of the prompt's
	// one icon; none when nil or "".
	ToolMeta   map[string]any
	PromptIcon string
}

// NewPinLab writes a lab with pinning set as muxLines says (pin_file is
// set to the lab's PinFile unless muxLines names one) and d as the child's
// first definitions; reader may use everything.
func NewPinLab(t testing.TB, muxLines string, d PinDefs) *PinLab {
	t.Helper()
	dir := t.TempDir()
	pl := &PinLab{Defs: filepath.Join(dir, "defs.json"), Requests: filepath.Join(dir, "requests.jsonl"),
		FailStart: filepath.Join(dir, "fail-start")}
	pl.WriteDefs(t, d)
	pl.Lab = NewLab(t, muxLines, Server{Alias: "docs",
		Env: map[string]string{"LAB_DEFS": pl.Defs, "LAB_REQUESTS": pl.Requests, "LAB_FAIL_INIT_FILE": pl.FailStart}})
	pl.PinFile = filepath.Join(pl.Dir, "mcpmux.lock")
	pl.WritePolicy(t, "reader", `allow = ["*"]`)
	return pl
}

// WriteDefs replaces the child's definitions file (by rename, so that the
// child never reads half of it); the child reads it at its next start or
// reload_defs call.
func (pl *PinLab) WriteDefs(t testing.TB, d PinDefs) {
	t.Helper()
	schema := d.Schema
	if schema == "" {
		schema = `{"type":"object","properties":{"q":{"type":"string"}}}`
	}
	tool := map[string]any{"name": "pinned", "description": d.Description, "inputSchema": json.RawMessage(schema),
		"annotations": map[string]any{"readOnlyHint": d.ReadOnlyHint}}
	if d.ToolMeta != nil {
		tool["_meta"] = d.ToolMeta
	}
	tools := []any{tool}
	if d.ExtraTool != "" {
		tools = append(tools, map[string]any{"name": d.ExtraTool, "description": "another"})
	}
	prompt := d.PromptName
	if prompt == "" {
		prompt = "pinprompt"
	}
	p := map[string]any{"name": prompt, "description": d.PromptDesc}
	if d.PromptIcon != "" {
		p["icons"] = []any{map[string]any{"src": d.PromptIcon}}
	}
	b, err := json.Marshal(map[string]any{"tools": tools, "prompts": []any{p}})
	if err != nil {
		t.Fatal(err)
	}
	tmp := pl.Defs + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, pl.Defs); err != nil {
		t.Fatal(err)
	}
}

// CallsOf counts the tools/call requests for the child's tool name that
// reached the child.
func (pl *PinLab) CallsOf(t testing.TB, name string) int {
	t.Helper()
	return pl.RequestsOf(t, "tools/call", name)
}

// RequestsOf counts the requests of method that reached the child naming
// name, the child's own name for a tool or prompt: in params.name
// (tools/call, prompts/get) or params.ref.name (completion/complete).
func (pl *PinLab) RequestsOf(t testing.TB, method, name string) int {
	t.Helper()
	n := 0
	for _, r := range ChildRequests(t, pl.Requests, method) {
		var p struct {
			Name string `json:"name"`
			Ref  struct {
				Name string `json:"name"`
			} `json:"ref"`
		}
		_ = json.Unmarshal(r.Params, &p)
		if p.Name == name || p.Ref.Name == name {
			n++
		}
	}
	return n
}

// PromptNames lists the prompts mcpmux shows this client, in order.
func (m *Mux) PromptNames() []string {
	m.t.Helper()
	var names []string
	for _, raw := range ListAll(m.t, m.Client, "prompts/list", "prompts") {
		var p struct{ Name string }
		_ = json.Unmarshal(raw, &p)
		names = append(names, p.Name)
	}
	return names
}

// WaitPrompts is WaitTools for prompts/list_changed and the prompt list.
func (m *Mux) WaitPrompts(what string, cond func(names []string) bool) []string {
	m.t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case n := <-m.notes:
			if n.Method != mcp.MethodNotificationPromptsListChanged {
				continue
			}
		case <-timeout:
			m.t.Fatalf("no prompts list_changed after which the prompt list %s; last: %v", what, m.PromptNames())
		}
		if names := m.PromptNames(); cond(names) {
			return names
		}
	}
}
