package search

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Search mode with the reference servers (server-everything,
// server-filesystem, server-memory) as real children of the real binary,
// driven by mcp-go clients over stdio and HTTP, at protocol 2025-11-25 and
// 2026-07-28.

// session is a client connected to mcpmux, over stdio (ts.Mux) or HTTP
// (ts.Conn), and how to wait for its notifications.
type session struct {
	c    *client.Client
	note func(method string) mcp.JSONRPCNotification
	// memory is held across a create and the search that checks it:
	// server-memory reads and rewrites its file in each call, so of two
	// sessions' creations at once on one child, one is lost.
	memory *sync.Mutex
}

// call is a tools/call of name with args; progress, when not "", is its
// _meta.progressToken.
func (s session) call(t *testing.T, name string, args map[string]any, progress string) *mcp.CallToolResult {
	t.Helper()
	res, err := s.try(name, args, progress)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func (s session) try(name string, args map[string]any, progress string) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if progress != "" {
		req.Params.Meta = &mcp.Meta{ProgressToken: mcp.ProgressToken(progress)}
	}
	return s.c.CallTool(ctx, req)
}

// through is a call of name with args through call_tool.
func (s session) through(t *testing.T, name string, args map[string]any, progress string) *mcp.CallToolResult {
	t.Helper()
	return s.call(t, callTool, map[string]any{"name": name, "arguments": args}, progress)
}

// find is find_tools' names for query (limit 0: the default).
func (s session) find(t *testing.T, query string, limit int) []string {
	t.Helper()
	args := map[string]any{"query": query}
	if limit > 0 {
		args["limit"] = limit
	}
	return found(t, s.call(t, findTools, args, ""))
}

func (s session) tools(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	res, err := s.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return sorted(names)
}

func stdioSession(m *ts.Mux) session {
	return session{c: m.Client, note: m.Notification, memory: new(sync.Mutex)}
}

func httpSession(c *ts.Conn, memory *sync.Mutex) session {
	return session{c: c.Client, note: c.Notification, memory: memory}
}

// sampler answers sampling/createMessage, whether it reaches the client as
// a server's request (2025-11-25) or in an input-required result
// (2026-07-28), with the prompt's text echoed.
type sampler struct{}

func (sampler) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	var first struct{ Text string }
	if len(req.Messages) > 0 {
		b, _ := json.Marshal(req.Messages[0].Content)
		_ = json.Unmarshal(b, &first)
	}
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant,
		Content: mcp.NewTextContent("sampled: " + first.Text)}, Model: "search-e2e-model"}, nil
}

// referenceLab is a lab whose children are the three reference servers,
// the filesystem's allowed root holding hello.txt; policy is reader's.
func referenceLab(t *testing.T, policy string) (lab *ts.Lab, root string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from a real file"), 0o644); err != nil {
		t.Fatal(err)
	}
	node, entry := ts.EverythingCommand(t)
	lab = ts.NewLab(t, "",
		ts.Server{Alias: "everything", Command: node, Args: []string{entry}, Extra: `startup_timeout = "30s"`},
		ts.FilesystemServer(t, "fs", root),
		ts.MemoryServer(t, "memory", filepath.Join(t.TempDir(), "memory.jsonl")))
	lab.WritePolicy(t, "reader", policy)
	return lab, root
}

const token = "search-e2e-token-reader"

// Over stdio and HTTP, at either protocol: the list is the two tools;
// find_tools finds each reference server's tool by what it does, and
// call_tool calls it as a direct call does; progress and a sampling round
// of server-everything's cross call_tool (at 2026-07-28 the round is an
// input-required result, and the client's retry is the same call_tool
// request with the requestState).
func TestSearchWithReferenceServers(t *testing.T) {
	t.Parallel()
	opts := []client.ClientOption{client.WithSamplingHandler(sampler{})}
	policy := "allow = [\"*\"]\ncatalog = \"search\"\n"
	httpLab, root := referenceLab(t, policy)
	httpLab.AddUpstream(t, `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(token)))
	h := ts.StartHTTPMux(t, httpLab, ts.HTTPStart{})
	// Each case connects its client on its own goroutine (a stdio one to
	// an mcpmux of its own), so that a failed wait fails that case.
	stdio := func(t *testing.T, version string) (session, string) {
		lab, r := referenceLab(t, policy)
		return stdioSession(ts.StartMuxClient(t, lab, version, opts...)), r
	}
	var httpMemory sync.Mutex
	overHTTP := func(t *testing.T, version string) (session, string) {
		return httpSession(ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: token, Version: version, Log: h.Log, Options: opts}), &httpMemory), root
	}
	for _, c := range []struct {
		name, version string
		connect       func(*testing.T, string) (session, string)
	}{
		{"stdio/2025-11-25", mcp.LATEST_LEGACY_PROTOCOL_VERSION, stdio},
		{"stdio/2026-07-28", mcp.ProtocolVersion20260728, stdio},
		{"http/2025-11-25", mcp.LATEST_LEGACY_PROTOCOL_VERSION, overHTTP},
		{"http/2026-07-28", mcp.ProtocolVersion20260728, overHTTP},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, root := c.connect(t, c.version)
			if v := s.c.ProtocolVersion(); v != c.version {
				t.Fatalf("negotiated %s, want %s", v, c.version)
			}
			if names := s.tools(t); !slices.Equal(names, []string{callTool, findTools}) {
				t.Fatalf("search mode lists %v", names)
			}

			// filesystem: find, then read a real file through call_tool.
			if names := s.find(t, "read a file", 0); !slices.Contains(names, "fs__read_text_file") {
				t.Errorf("find_tools \"read a file\" found %v", names)
			}
			path := filepath.Join(root, "hello.txt")
			direct := s.call(t, "fs__read_text_file", map[string]any{"path": path}, "")
			through := s.through(t, "fs__read_text_file", map[string]any{"path": path}, "")
			if through.IsError || ts.Text(through) != "hello from a real file" || ts.Text(direct) != ts.Text(through) {
				t.Errorf("read_text_file through call_tool: %v %q; directly %q", through.IsError, ts.Text(through), ts.Text(direct))
			}

			// memory: an entity created through call_tool is found by a
			// search through call_tool.
			if names := s.find(t, "create entities in the knowledge graph", 0); !slices.Contains(names, "memory__create_entities") {
				t.Errorf("find_tools \"create entities\" found %v", names)
			}
			s.memory.Lock()
			entity := "probe-" + strings.NewReplacer("/", "-", ".", "-").Replace(c.name)
			if res := s.through(t, "memory__create_entities", map[string]any{"entities": []any{
				map[string]any{"name": entity, "entityType": "test", "observations": []any{"made through call_tool"}}}}, ""); res.IsError {
				s.memory.Unlock()
				t.Fatalf("create_entities through call_tool: %q", ts.Text(res))
			}
			if res := s.through(t, "memory__search_nodes", map[string]any{"query": entity}, ""); res.IsError || !strings.Contains(ts.Text(res), "made through call_tool") {
				t.Errorf("search_nodes through call_tool: %v %q", res.IsError, ts.Text(res))
			}
			s.memory.Unlock()

			// everything: progress reaches the caller of call_tool under its
			// own token.
			if names := s.find(t, "long running operation with progress", 0); !slices.Contains(names, "everything__trigger-long-running-operation") {
				t.Errorf("find_tools \"long running operation\" found %v", names)
			}
			progressToken := "search-" + c.name
			res := s.through(t, "everything__trigger-long-running-operation", map[string]any{"duration": 0.2, "steps": 2}, progressToken)
			if res.IsError || !strings.Contains(ts.Text(res), "Long running operation completed") {
				t.Errorf("long-running-operation through call_tool: %v %q", res.IsError, ts.Text(res))
			}
			if n := s.note(string(mcp.MethodNotificationProgress)); fmt.Sprint(n.Params.AdditionalFields["progressToken"]) != progressToken {
				t.Errorf("progress %v, want token %q", n.Params.AdditionalFields, progressToken)
			}

			// everything: a sampling round, answered by the client, gives
			// through call_tool what it gives directly.
			sampling := "everything__trigger-sampling-request"
			ts.WaitFor(t, sampling+" to be found", func() bool { return slices.Contains(s.find(t, "sampling request", 20), sampling) })
			args := map[string]any{"prompt": "name a colour", "maxTokens": 12}
			direct = s.call(t, sampling, args, "")
			through = s.through(t, sampling, args, "")
			if through.IsError || !strings.Contains(ts.Text(through), "sampled: ") || !strings.Contains(ts.Text(through), "name a colour") ||
				ts.Text(through) != ts.Text(direct) {
				t.Errorf("sampling through call_tool: %v %q; directly %q", through.IsError, ts.Text(through), ts.Text(direct))
			}
		})
	}
}

// restricted is reader's policy in TestSearchRestricted: the filesystem's
// tools and memory's read_graph, with a rule that refuses reading a path
// with "secret" in it.
const restricted = `allow = ["fs__*", "memory__read_graph"]
catalog = "search"

[[rule]]
tools = ["fs__read_text_file"]
deny_if = 'args.path.contains("secret")'
message = "no secrets through search"
`

// A restricted identity, at either protocol: find_tools never finds what
// it may not call, whatever it asks for; call_tool of a tool outside its
// policy is refused as a direct call is, and a call a rule refuses gets
// the rule's message, as a direct call does, audited as a rule's refusal
// under the tool's own name.
func TestSearchRestricted(t *testing.T) {
	t.Parallel()
	for _, version := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, mcp.ProtocolVersion20260728} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			lab, root := referenceLab(t, restricted)
			if err := os.WriteFile(filepath.Join(root, "secret.txt"), []byte("the secret"), 0o644); err != nil {
				t.Fatal(err)
			}
			m := ts.StartMuxClient(t, lab, version)
			s := stdioSession(m)
			allowed := func(name string) bool { return strings.HasPrefix(name, "fs__") || name == "memory__read_graph" }
			var all []string
			for _, q := range []string{"read a file", "echo a message", "create entities in the knowledge graph", "read the knowledge graph",
				"sampling request", "long running operation", "add two numbers", "delete observations"} {
				names := s.find(t, q, 20)
				if i := slices.IndexFunc(names, func(n string) bool { return !allowed(n) }); i >= 0 {
					t.Errorf("find_tools %q found %s, which reader may not call (all: %v)", q, names[i], names)
				}
				all = append(all, names...)
			}
			if !slices.Contains(all, "fs__read_text_file") || !slices.Contains(all, "memory__read_graph") {
				t.Errorf("find_tools found %v, without what reader may call", all)
			}

			// Outside the policy: refused as a direct call is.
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"everything__echo", map[string]any{"message": "hi"}},
				{"memory__create_entities", map[string]any{"entities": []any{}}},
			} {
				_, errDirect := s.try(c.tool, c.args, "")
				_, errThrough := s.try(callTool, map[string]any{"name": c.tool, "arguments": c.args}, "")
				if errDirect == nil || errThrough == nil || errDirect.Error() != errThrough.Error() || !strings.Contains(errThrough.Error(), "'"+c.tool+"' not found") {
					t.Errorf("%s: directly %v, through call_tool %v", c.tool, errDirect, errThrough)
				}
			}

			// A rule's refusal: its message, and one audit line each under
			// fs__read_text_file.
			secret := map[string]any{"path": filepath.Join(root, "secret.txt")}
			direct := s.call(t, "fs__read_text_file", secret, "")
			through := s.through(t, "fs__read_text_file", secret, "")
			if want := "fs__read_text_file: no secrets through search"; !through.IsError || ts.Text(through) != want || ts.Text(direct) != want {
				t.Errorf("a rule's refusal through call_tool: %v %q; directly %v %q; want %q", through.IsError, ts.Text(through), direct.IsError, ts.Text(direct), want)
			}
			m.Log.WaitLines(t, "two refusals by the rule", 2, ts.Msg("call", "tool", "fs__read_text_file", "decision", "rule"))
			if res := s.through(t, "fs__read_text_file", map[string]any{"path": filepath.Join(root, "hello.txt")}, ""); res.IsError || ts.Text(res) != "hello from a real file" {
				t.Errorf("a call the rule lets through: %v %q", res.IsError, ts.Text(res))
			}
		})
	}
}
