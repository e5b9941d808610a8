package main

// With LAB_DEFS set, the server also offers the tools and prompts defined
// in that JSON file, so that a test can change a definition across a
// restart (edit the file, kill the child) or while it runs (edit the file,
// call reload_defs):
//
//	{"tools":   [{"name", "title", "description", "inputSchema", "annotations", "_meta", "icons"}],
//	 "prompts": [{"name", "title", "description", "arguments", "_meta", "icons"}]}
//
// reload_defs re-reads the file and replaces those tools and prompts,
// which sends tools/list_changed and prompts/list_changed. Each tool
// answers the text "defined NAME"; each prompt one user message "defined
// NAME". completion/complete of any argument ARG of a prompt NAME answers
// the one value "NAME/ARG" (with LAB_FIDELITY too, fidelity.go's
// completions answer instead).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

type defsFile struct {
	Tools []struct {
		Name        string              `json:"name"`
		Title       string              `json:"title"`
		Description string              `json:"description"`
		InputSchema json.RawMessage     `json:"inputSchema"`
		Annotations *mcp.ToolAnnotation `json:"annotations"`
		Meta        *mcp.Meta           `json:"_meta"`
		Icons       []mcp.Icon          `json:"icons"`
	} `json:"tools"`
	Prompts []mcp.Prompt `json:"prompts"`
}

// defined keeps the names of what LAB_DEFS defined last, to replace them.
type defined struct {
	tools, prompts []string
}

// defsOptions are the server options LAB_DEFS adds; fidelityOptions,
// which come after them, replace the completion provider.
func defsOptions() []server.ServerOption {
	return []server.ServerOption{
		server.WithPromptCapabilities(true),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(defsCompletions{}),
	}
}

// defsCompletions completes a prompt's argument with the prompt's and the
// argument's names, so that a test can tell which prompt the child was
// asked about.
type defsCompletions struct{}

func (defsCompletions) CompletePromptArgument(_ context.Context, name string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	return &mcp.Completion{Values: []string{name + "/" + arg.Name}, Total: 1}, nil
}

// registerDefs offers the tools and prompts of the file at path, and
// reload_defs.
func registerDefs(s *server.MCPServer, path string) error {
	d := &defined{}
	if err := d.load(s, path); err != nil {
		return err
	}
	s.AddTool(mcp.NewTool("reload_defs", mcp.WithDescription("Re-read LAB_DEFS and replace the tools and prompts it defines.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := d.load(s, path); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText("reloaded"), nil
		})
	return nil
}

func (d *defined) load(s *server.MCPServer, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var f defsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(d.tools) > 0 {
		s.DeleteTools(d.tools...)
	}
	if len(d.prompts) > 0 {
		s.DeletePrompts(d.prompts...)
	}
	d.tools, d.prompts = nil, nil
	var tools []server.ServerTool
	for _, t := range f.Tools {
		schema := t.InputSchema
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		tool := mcp.NewToolWithRawSchema(t.Name, t.Description, schema)
		tool.Title, tool.Meta, tool.Icons = t.Title, t.Meta, t.Icons
		if t.Annotations != nil {
			tool.Annotations = *t.Annotations
		}
		name := t.Name
		tools = append(tools, server.ServerTool{Tool: tool, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("defined " + name), nil
		}})
		d.tools = append(d.tools, t.Name)
	}
	var prompts []server.ServerPrompt
	for _, p := range f.Prompts {
		name := p.Name
		prompts = append(prompts, server.ServerPrompt{Prompt: p, Handler: func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("defined "+name))}), nil
		}})
		d.prompts = append(d.prompts, p.Name)
	}
	if len(tools) > 0 {
		s.AddTools(tools...)
	}
	if len(prompts) > 0 {
		s.AddPrompts(prompts...)
	}
	return nil
}
