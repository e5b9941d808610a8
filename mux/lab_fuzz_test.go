package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/policy"
)

// The fuzz targets that drive whole requests through mcpmux share this set-up:
// a started Mux whose one child is a real MCP server (mcp-go's), served in
// process over streamable HTTP, so that every fuzz input costs a round trip
// on loopback rather than a process start.

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

// fuzzLab is a started Mux with the lab child ready.
type fuzzLab struct {
	m    *Mux
	root string // config and policy directory
}

// startFuzzLab starts the lab child and a Mux on it, and stops both (and
// checks that no goroutine outlives them) when f ends.
func startFuzzLab(f *testing.F) *fuzzLab {
	f.Helper()
	_, before := goroutines()

	child := server.NewMCPServer("fuzzlab", "1", server.WithToolCapabilities(true))
	child.AddTools(fuzzChildTools()...)
	childHTTP := server.NewStreamableHTTPServer(child, server.WithStateful(true))
	hs := httptest.NewServer(childHTTP)

	root := f.TempDir()
	policies := filepath.Join(root, "policies")
	if err := os.Mkdir(policies, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(policies, fuzzIdentity+".toml"), []byte(`allow = ["*"]`+"\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	src := fmt.Sprintf("[mux]\npolicy_dir = %q\n%s\n\n[servers.lab]\nurl = %q\nhide = [\"secret\"]\nread_only = [\"echo\", \"pick\"]\n%s\n",
		policies, fuzzMuxLines, hs.URL+"/mcp", fuzzServerLines)
	cfg, err := config.Parse(filepath.Join(root, "mcpmux.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		f.Fatal(err)
	}
	store, err := policy.NewStore(cfg.Mux.PolicyDir, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	m, err := New(cfg, store, Options{Log: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	m.Start(context.Background())
	f.Cleanup(func() {
		m.Close()
		_ = childHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
		checkGoroutines(f, before)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		f.Fatal(err)
	}
	if n := len(m.Tools(fuzzIdentity)); n != len(fuzzChildTools())-1 {
		f.Fatalf("the lab offers %d tools, want %d: %+v", n, len(fuzzChildTools())-1, m.Status())
	}
	return &fuzzLab{m: m, root: root}
}

// checkGoroutines fails tb if more than n goroutines are still running once
// the ones ending now have had time to.
func checkGoroutines(tb testing.TB, n int) {
	tb.Helper()
	var stacks string
	count := 0
	if !testsupport.Settles(func() bool {
		stacks, count = goroutines()
		return count <= n
	}) {
		tb.Fatalf("%d goroutines running; want at most %d:\n%s", count, n, stacks)
	}
}

// goroutines returns every goroutine's stack and how many there are, leaving
// out the signal loop, which the fuzzing engine starts and nothing ends.
func goroutines() (string, int) {
	buf := make([]byte, 1<<20)
	stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
	n := 0
	for _, s := range stacks {
		if !strings.Contains(s, "os/signal.loop") {
			n++
		}
	}
	return strings.Join(stacks, "\n\n"), n
}
