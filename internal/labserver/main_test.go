package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// buildLab compiles the server into a temporary directory.
func buildLab(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "labserver")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startLab starts bin under an MCP stdio client and initializes it with the
// legacy handshake. It also returns the child's *exec.Cmd.
func startLab(t *testing.T, ctx context.Context, bin string, env ...string) (*client.Client, *exec.Cmd) {
	t.Helper()
	var cmd *exec.Cmd
	c, err := client.NewStdioMCPClientWithOptions(bin, env, nil,
		transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
			cmd = exec.CommandContext(ctx, command, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd, nil
		}))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// NewStdioMCPClient starts the transport but not the client: without
	// Start no notification handler is installed.
	if err := c.Start(ctx); err != nil {
		t.Fatalf("client start: %v", err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "labserver-test", Version: "0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c, cmd
}

func call(t *testing.T, ctx context.Context, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want 1 content item, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return tc.Text
}

func wantText(t *testing.T, res *mcp.CallToolResult, isError bool, want string) {
	t.Helper()
	if got := text(t, res); got != want || res.IsError != isError {
		t.Fatalf("got (%q, isError=%v), want (%q, isError=%v)", got, res.IsError, want, isError)
	}
}

func TestLabServer(t *testing.T) {
	bin := buildLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("tools", func(t *testing.T) {
		notes := filepath.Join(t.TempDir(), "notes.txt")
		started := t.TempDir()
		c, cmd := startLab(t, ctx, bin, "LAB_SOURCE=tickets", "LAB_NOTES="+notes, "LAB_STARTED_DIR="+started)

		list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		for _, want := range []string{"search", "crash_for_test", "append_note", "slow", "echo", "pick", "whoami", "spawn_grandchild", "notify_changed"} {
			if !slices.Contains(names, want) {
				t.Errorf("tool %q missing from %v", want, names)
			}
		}
		if slices.Contains(names, "extra") {
			t.Errorf("extra listed before notify_changed")
		}

		// The wire form of pick's schema keeps every keyword (mcp.Tool,
		// once decoded, would drop oneOf and friends).
		raw, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(int64(9001)), Method: "tools/list",
		})
		if err != nil || raw.Error != nil {
			t.Fatalf("raw tools/list: %v %v", err, raw.Error)
		}
		var wire struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
				Annotations map[string]any  `json:"annotations"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(raw.Result, &wire); err != nil {
			t.Fatal(err)
		}
		for _, tool := range wire.Tools {
			switch tool.Name {
			case "pick":
				var got, want any
				_ = json.Unmarshal(tool.InputSchema, &got)
				_ = json.Unmarshal([]byte(pickSchema), &want)
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(want)
				if string(gb) != string(wb) {
					t.Errorf("pick schema = %s, want %s", gb, wb)
				}
			case "search":
				if string(tool.InputSchema) != `{"properties":{"query":{"type":"string"}},"required":["query"],"type":"object"}` {
					t.Errorf("search schema = %s", tool.InputSchema)
				}
			}
			ro, _ := tool.Annotations["readOnlyHint"].(bool)
			wantRO := map[string]bool{"search": true, "slow": true, "echo": true, "pick": true, "whoami": true}[tool.Name]
			if ro != wantRO {
				t.Errorf("%s readOnlyHint = %v, want %v", tool.Name, ro, wantRO)
			}
		}

		wantText(t, call(t, ctx, c, "search", map[string]any{"query": "public"}), false, "tickets: public evidence")
		wantText(t, call(t, ctx, c, "search", map[string]any{"query": "private"}), true, "service policy denies private data")
		wantText(t, call(t, ctx, c, "search", map[string]any{"query": "other"}), true, "unknown query")

		wantText(t, call(t, ctx, c, "append_note", map[string]any{"text": "one"}), false, "noted")
		wantText(t, call(t, ctx, c, "append_note", map[string]any{"text": "two", "delay_ms": 10}), false, "noted")
		if b, err := os.ReadFile(notes); err != nil || string(b) != "one\ntwo\n" {
			t.Errorf("notes = %q, %v", b, err)
		}

		res := call(t, ctx, c, "echo", map[string]any{"message": "hi"})
		wantText(t, res, false, "tickets: hi")
		sc, ok := res.StructuredContent.(map[string]any)
		if !ok || sc["source"] != "tickets" || sc["message"] != "hi" {
			t.Errorf("structured content = %#v", res.StructuredContent)
		}

		wantText(t, call(t, ctx, c, "slow", map[string]any{"ms": 20, "tag": "a"}), false, "slept 20 tag=a")
		if _, err := os.Stat(filepath.Join(started, "a")); err != nil {
			t.Errorf("started marker: %v", err)
		}

		wantText(t, call(t, ctx, c, "pick", map[string]any{"id": 42}), false, "picked 42")
		wantText(t, call(t, ctx, c, "pick", map[string]any{"name": "x"}), false, "picked x")

		wantText(t, call(t, ctx, c, "whoami", nil), false, strconv.Itoa(cmd.Process.Pid))

		pid, err := strconv.Atoi(text(t, call(t, ctx, c, "spawn_grandchild", nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("kill grandchild %d: %v", pid, err)
		}

		changed := make(chan struct{}, 4)
		c.OnNotification(func(n mcp.JSONRPCNotification) {
			if n.Method == mcp.MethodNotificationToolsListChanged {
				changed <- struct{}{}
			}
		})
		for _, want := range []string{"extra on", "extra off"} {
			wantText(t, call(t, ctx, c, "notify_changed", nil), false, want)
			select {
			case <-changed:
			case <-time.After(3 * time.Second):
				t.Fatalf("no list_changed after %q", want)
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		c, _ := startLab(t, ctx, bin)
		cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer ccancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "slow"
		req.Params.Arguments = map[string]any{"ms": 60000}
		if _, err := c.CallTool(cctx, req); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		// The server is still responsive.
		wantText(t, call(t, ctx, c, "search", map[string]any{"query": "public"}), false, "docs: public evidence")
	})

	t.Run("modern", func(t *testing.T) {
		// Without a pinned version mcp-go's client negotiates the stateless
		// 2026-07-28 protocol (server/discover) instead of initialize.
		c, err := client.NewStdioMCPClient(bin, []string{"LAB_SOURCE=kb"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		res, err := c.Initialize(ctx, mcp.InitializeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if res.ProtocolVersion != mcp.ProtocolVersion20260728 {
			t.Errorf("negotiated %q", res.ProtocolVersion)
		}
		wantText(t, call(t, ctx, c, "search", map[string]any{"query": "public"}), false, "kb: public evidence")
	})

	t.Run("pages", func(t *testing.T) {
		c, _ := startLab(t, ctx, bin, "LAB_PAGE_SIZE=2")
		page, err := c.ListToolsByPage(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Tools) != 2 || page.NextCursor == "" {
			t.Fatalf("first page: %d tools, cursor %q", len(page.Tools), page.NextCursor)
		}
		all, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.Tools) != 9 {
			t.Errorf("all pages: %d tools, want 9", len(all.Tools))
		}
	})

	t.Run("records", func(t *testing.T) {
		dir := t.TempDir()
		c, cmd := startLab(t, ctx, bin, "LAB_SOURCE=wiki", "LAB_RECORDS_DIR="+dir)
		pid := cmd.Process.Pid
		want := func(op, key string) string {
			return fmt.Sprintf(`{"op":%q,"key":%q,"source":"wiki","pid":%d}`, op, key, pid)
		}
		wantText(t, call(t, ctx, c, "probe", map[string]any{"nonce": "n1"}), false, want("probe", "n1"))
		wantText(t, call(t, ctx, c, "record", map[string]any{"id": "w1", "ms": 5}), false, want("record", "w1"))

		// A call cancelled while it waits has been recorded all the same.
		cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer ccancel()
		req := mcp.CallToolRequest{}
		req.Params.Name = "record"
		req.Params.Arguments = map[string]any{"id": "w2", "ms": 60000}
		if _, err := c.CallTool(cctx, req); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		wantText(t, call(t, ctx, c, "record", map[string]any{"ms": -1, "id": "bad"}), true, "ms must be >= 0")

		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(pid)+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if got, w := string(b), want("probe", "n1")+"\n"+want("record", "w1")+"\n"+want("record", "w2")+"\n"; got != w {
			t.Errorf("records = %q, want %q", got, w)
		}

		list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range list.Tools {
			if ro := *tool.Annotations.ReadOnlyHint; (tool.Name == "probe" || tool.Name == "record") && ro != (tool.Name == "probe") {
				t.Errorf("%s readOnlyHint = %v", tool.Name, ro)
			}
		}
	})

	t.Run("crash", func(t *testing.T) {
		c, cmd := startLab(t, ctx, bin)
		req := mcp.CallToolRequest{}
		req.Params.Name = "crash_for_test"
		if res, err := c.CallTool(ctx, req); err == nil {
			t.Fatalf("crash_for_test answered: %+v", res)
		}
		_ = c.Close()
		if code := cmd.ProcessState.ExitCode(); code != 7 {
			t.Fatalf("exit code %d, want 7", code)
		}
	})

	t.Run("fail_init", func(t *testing.T) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "LAB_FAIL_INIT=1")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("err = %v, want exit 3", err)
		}
		if !strings.Contains(string(out), "LAB_FAIL_INIT") {
			t.Errorf("stderr = %q", out)
		}
	})

	t.Run("silent", func(t *testing.T) {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "LAB_SILENT=1")
		cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n")
		out, err := cmd.Output()
		if err != nil || len(out) != 0 {
			t.Fatalf("silent: out %q, err %v", out, err)
		}
	})
}
