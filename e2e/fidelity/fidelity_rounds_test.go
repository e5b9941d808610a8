package fidelity

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// Rounds end to end: the real server-everything (which speaks 2025-11-25
// and asks its client with server-initiated requests) behind the real
// mcpmux binary, and an mcp-go client at protocol 2026-07-28, which takes
// no requests from a server: its sampling, elicitation and roots handlers
// answer the input-required results mcpmux makes of server-everything's
// requests, and the mcp-go client drives the retries itself.

// everythingAnswers are the client's handlers: fixed answers, so that what
// server-everything makes of them is the same whichever way they reach it.
type everythingAnswers struct{}

func (everythingAnswers) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	// The content's type depends on how the request reached the client
	// (mcp-go parses a server-initiated request's, not an input request's):
	// its JSON is the same.
	var first struct{ Text string }
	if len(req.Messages) > 0 {
		b, _ := json.Marshal(req.Messages[0].Content)
		_ = json.Unmarshal(b, &first)
	}
	text := first.Text
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant,
		Content: mcp.NewTextContent(fmt.Sprintf("answer to %q (max %d)", text, req.MaxTokens))}, Model: "e2e-model"}, nil
}

func (everythingAnswers) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"name": "Ada Lovelace", "check": true, "integer": 7}}}, nil
}

func (everythingAnswers) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///client/root", Name: "client root"}}}, nil
}

func everythingOptions() []client.ClientOption {
	a := everythingAnswers{}
	return []client.ClientOption{client.WithSamplingHandler(a), client.WithElicitationHandler(a), client.WithRootsHandler(a)}
}

// everythingCalls are server-everything's tools that ask the client, with
// their arguments.
var everythingCalls = []struct {
	tool string
	args map[string]any
}{
	{"trigger-sampling-request", map[string]any{"prompt": "name a colour", "maxTokens": 12}},
	{"trigger-elicitation-request", map[string]any{}},
	{"get-roots-list", map[string]any{}},
}

// everythingText calls tool on c and returns the texts of its result. It
// waits for c to list tool first: server-everything registers the tools
// that need a client capability once initialized.
func everythingText(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	ts.WaitFor(t, tool+" to be listed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
		defer cancel()
		res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return false
		}
		for _, tl := range res.Tools {
			if tl.Name == tool {
				return true
			}
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s: an error: %q", tool, texts)
	}
	return strings.Join(texts, "\n")
}

// everythingDirect connects a 2025-11-25 client with everythingOptions to
// server-everything itself, over stdio.
func everythingDirect(t *testing.T, node, entry string) *client.Client {
	t.Helper()
	tr := transport.NewStdio(node, nil, entry)
	c := client.NewClient(tr, append(everythingOptions(), client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))...)
	// Start's context is the process's: it must outlive this function.
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-direct", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFidelityRoundsWithServerEverything: through mcpmux, over stdio and
// over HTTP, a 2026-07-28 client's trigger-sampling-request,
// trigger-elicitation-request and get-roots-list return what the same
// client's handlers get from server-everything directly (as a 2025-11-25
// client: server-everything speaks no 2026-07-28), server-everything's
// requests having reached the client as input-required results. For
// roots, server-everything asks once right after its start, outside any
// call: mcpmux cannot hand that to a 2026-07-28 client, so the child asks
// again during get-roots-list, in a round.
func TestFidelityRoundsWithServerEverything(t *testing.T) {
	t.Parallel()
	node, entry := ts.EverythingCommand(t)
	direct := everythingDirect(t, node, entry)
	want := map[string]string{}
	for _, c := range everythingCalls {
		want[c.tool] = everythingText(t, direct, c.tool, c.args)
	}
	if !strings.Contains(want["trigger-sampling-request"], `answer to \"Resource trigger-sampling-request context: name a colour\" (max 12)`) ||
		!strings.Contains(want["trigger-elicitation-request"], "Ada Lovelace") || !strings.Contains(want["get-roots-list"], "file:///client/root") {
		t.Fatalf("server-everything directly: %q", want)
	}

	newLab := func() *ts.Lab {
		lab := ts.NewLab(t, "", ts.Server{Alias: "everything", Command: node, Args: []string{entry}})
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		return lab
	}
	httpLab := newLab()
	httpLab.AddUpstream(t, `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(ts.FidelityToken("reader"))))
	h := ts.StartHTTPMux(t, httpLab, ts.HTTPStart{})
	modern := map[string]*client.Client{
		"stdio": ts.StartMuxClient(t, newLab(), mcp.ProtocolVersion20260728, everythingOptions()...).Client,
		"http": ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.FidelityToken("reader"), Version: mcp.ProtocolVersion20260728,
			Log: h.Log, Options: everythingOptions()}).Client,
	}
	for name, c := range modern {
		t.Run(name, func(t *testing.T) {
			if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
				t.Fatalf("negotiated %s", v)
			}
			for _, call := range everythingCalls {
				got := everythingText(t, c, "everything__"+call.tool, call.args)
				if w := want[call.tool]; got != w {
					t.Errorf("%s through mcpmux:\n%s\nwant:\n%s", call.tool, got, w)
				}
			}
		})
	}
	// What server-everything got from the client is the client's answer, as
	// it sent it: its raw result echoes it.
	var raw struct {
		Model   string
		Content struct{ Text string }
	}
	sampled := want["trigger-sampling-request"]
	if i := strings.Index(sampled, "{"); i < 0 || json.Unmarshal([]byte(sampled[i:]), &raw) != nil || raw.Model != "e2e-model" {
		t.Errorf("the sampling result server-everything echoed: %q", sampled)
	}
}
