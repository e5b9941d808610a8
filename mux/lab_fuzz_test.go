package mux

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/upstream"
)

// The fuzz targets that drive whole requests through mcpmux share one lab
// (lab_test.go), started once per target, so that every fuzz input costs a
// round trip on loopback rather than a process start.

// fuzzIdentity is the identity fuzzed requests come from; its policy allows
// every tool.
const fuzzIdentity = "reader"

// Timeouts short enough that an input mcpmux mishandles (a request it never
// answers holds the stdio drain for call_timeout + startup_timeout) fails
// within seconds, long enough never to cut a healthy call on a loaded CI
// machine.
const fuzzMuxLines = `call_timeout = "3s"`
const fuzzServerLines = `startup_timeout = "3s"`

// fuzzChildTools are the lab child's tools: the shapes of schema mcpmux
// validates against (required, nested, oneOf, enum, bounds) and a name it
// must rewrite. Each but slow answers at once.
func fuzzChildTools() []server.ServerTool {
	text := func(s string) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(s), nil
		}
	}
	raw := func(name, schema string) mcp.Tool {
		return mcp.NewToolWithRawSchema(name, "fuzz lab tool "+name, json.RawMessage(schema))
	}
	return []server.ServerTool{
		{Tool: mcp.NewTool("echo", mcp.WithString("message")),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				msg := req.GetString("message", "")
				return mcp.NewToolResultStructured(map[string]any{"message": msg}, msg), nil
			}},
		{Tool: raw("pick", `{"type":"object","oneOf":[{"required":["id"]},{"required":["name"]}],
			"properties":{"id":{"type":"integer","minimum":0},"name":{"type":"string","maxLength":16}},
			"additionalProperties":false}`), Handler: text("picked")},
		{Tool: raw("nested", `{"type":"object","required":["items"],"properties":{
			"items":{"type":"array","maxItems":8,"items":{"type":"object","required":["n"],
				"properties":{"n":{"type":"integer","minimum":0,"maximum":10},"tags":{"type":"array","items":{"type":"string"}}}}},
			"mode":{"enum":["a","b",null]},"deep":{"$ref":"#/$defs/node"}},
			"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}}}`), Handler: text("nested")},
		{Tool: raw("write.file", `{"type":"object","properties":{"path":{"type":"string","pattern":"^[a-z/]+$"}}}`),
			Handler: text("written")},
		{Tool: mcp.NewTool("fail"), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("the lab tool failed"), nil
		}},
		{Tool: mcp.NewTool("secret"), Handler: text("hidden by config")},
		// Slow enough to be in flight when a short input ends, so that the
		// stdio drain has something to wait for.
		{Tool: mcp.NewTool("slow"), Handler: func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t := time.NewTimer(20 * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return mcp.NewToolResultText("slept"), nil
			case <-ctx.Done():
				return mcp.NewToolResultError("the lab tool was cancelled"), nil
			}
		}},
	}
}

// startFuzzLab starts the lab child and a Mux on it, and stops both (and
// checks that no goroutine outlives them) when f ends.
func startFuzzLab(f *testing.F) *Mux {
	f.Helper()
	m := startLab(f, labSpec{
		tools:       fuzzChildTools(),
		allow:       []string{fuzzIdentity},
		muxLines:    fuzzMuxLines,
		serverLines: "hide = [\"secret\"]\nread_only = [\"echo\", \"pick\"]\n" + fuzzServerLines,
		checkLeaks:  true,
	})
	if n := len(m.Tools(upstream.WithIdentity(context.Background(), fuzzIdentity))); n != len(fuzzChildTools())-1 {
		f.Fatalf("the lab offers %d tools, want %d: %+v", n, len(fuzzChildTools())-1, m.Status())
	}
	return m
}
