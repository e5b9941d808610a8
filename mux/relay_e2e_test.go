package mux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// The relay end to end: a real mcp-go server whose handlers answer with
// placeholders, served through mcpmux's own edges (Mux.ServeStdio and
// HTTPUpstream), read by a client that looks at the bytes.

const (
	relayPromptPayload   = `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi <there>","annotations":{"x-a":1}}}],"x-p":12345678901234567890}`
	relayReadPayload     = `{"contents":[{"uri":"file:///r","mimeType":"text/plain","text":"<r> & \u2029","_meta":{"n":12345678901234567890},"x-c":1}],"x-r":true}`
	relayCompletePayload = `{"completion":{"values":["a","b"],"total":2,"x-v":1},"_meta":{"n":12345678901234567890}}`
)

type relayCompleter struct{}

func (relayCompleter) CompletePromptArgument(context.Context, string, mcp.CompleteArgument, mcp.CompleteContext) (*mcp.Completion, error) {
	return relayCompletion(json.RawMessage(relayCompletePayload)), nil
}

func (relayCompleter) CompleteResourceArgument(context.Context, string, mcp.CompleteArgument, mcp.CompleteContext) (*mcp.Completion, error) {
	return relayCompletion(json.RawMessage(relayCompletePayload)), nil
}

// relayServer is an mcp-go server that answers every kind through a
// placeholder. "relay-sse" sends a notification first, which makes mcp-go's
// HTTP transport answer with an event stream.
func relayServer() *server.MCPServer {
	hooks := &server.Hooks{}
	addRelayHooks(hooks)
	srv := server.NewMCPServer("mcpmux", "test",
		server.WithHooks(hooks),
		server.WithToolCapabilities(false),
		server.WithPromptCapabilities(false),
		server.WithResourceCapabilities(false, false),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(relayCompleter{}),
		server.WithResourceCompletionProvider(relayCompleter{}),
	)
	srv.AddTool(mcp.NewTool("relay"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return relayToolResult(json.RawMessage(relayToolPayload)), nil
	})
	srv.AddTool(mcp.NewTool("relay-sse"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Over stdio, with the requests pipelined, the session may not count
		// as initialized yet, and mcp-go refuses the notification: it is here
		// for HTTP, where it turns the answer into an event stream.
		_ = srv.SendNotificationToClient(ctx, "notifications/message", map[string]any{"level": "info", "data": "before"})
		return relayToolResult(json.RawMessage(relayToolPayload)), nil
	})
	srv.AddPrompt(mcp.NewPrompt("p"), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return relayPromptResult(json.RawMessage(relayPromptPayload)), nil
	})
	srv.AddResource(mcp.NewResource("file:///r", "r"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return relayResourceContents(json.RawMessage(relayReadPayload)), nil
	})
	return srv
}

// relayMux is a Mux whose upstream server is srv and that has no children:
// its edges are the ones under test.
func relayMux(srv *server.MCPServer) *Mux {
	return &Mux{cfg: &config.Config{}, log: zerolog.Nop(), srv: srv}
}

// relayRequest is one request of the end-to-end tests and the payload its
// answer must carry.
type relayRequest struct {
	method  mcp.MCPMethod
	params  string
	payload string
}

// needsSession is true of the request whose handler sends a notification,
// which takes a session that was initialized.
func (r relayRequest) needsSession() bool { return strings.Contains(r.params, `"relay-sse"`) }

var relayRequests = []relayRequest{
	{mcp.MethodToolsCall, `{"name":"relay","arguments":{}}`, relayToolPayload},
	{mcp.MethodPromptsGet, `{"name":"p"}`, relayPromptPayload},
	{mcp.MethodResourcesRead, `{"uri":"file:///r"}`, relayReadPayload},
	{mcp.MethodCompletionComplete, `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}}`, relayCompletePayload},
	{mcp.MethodCompletionComplete, `{"ref":{"type":"ref/resource","uri":"file:///{x}"},"argument":{"name":"x","value":""}}`, relayCompletePayload},
	// Last: once a session has had an event stream, mcp-go answers it with
	// streams only.
	{mcp.MethodToolsCall, `{"name":"relay-sse","arguments":{}}`, relayToolPayload},
}

// modernParams adds the _meta a 2026-07-28 request carries to params.
func modernParams(params string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`
	if params == "{}" {
		return "{" + meta + "}"
	}
	return "{" + meta + "," + params[1:]
}

func requestLine(id int, method mcp.MCPMethod, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// checkRelayed fails t unless msg answers id with payload: exactly payload
// for a 2025-11-25 request, and for a 2026-07-28 one payload with what
// mcp-go's decoration adds (resultType, serverInfo in _meta, caching hints
// on a read), every value of the payload's byte for byte.
func checkRelayed(t *testing.T, msg []byte, id int, payload string, modern bool) {
	t.Helper()
	top := splitMessage(t, msg)
	if string(top["id"]) != fmt.Sprint(id) || string(top["jsonrpc"]) != `"2.0"` {
		t.Fatalf("answer to %d: %s", id, msg)
	}
	got := top["result"]
	if !modern {
		if string(got) != payload {
			t.Fatalf("answer to %d: result\n got %s\nwant %s", id, got, payload)
		}
		return
	}
	res, want := splitMessage(t, got), splitMessage(t, []byte(payload))
	if string(res["resultType"]) != `"complete"` {
		t.Errorf("answer to %d: resultType %s", id, res["resultType"])
	}
	for k, v := range want {
		if k != "_meta" && string(res[k]) != string(v) {
			t.Errorf("answer to %d: %s is %s, want %s", id, k, res[k], v)
		}
	}
	meta := splitMessage(t, res["_meta"])
	if meta[mcp.MetaKeyServerInfo] == nil || meta[relayKey] != nil {
		t.Errorf("answer to %d: _meta %s", id, res["_meta"])
	}
	if m, ok := want["_meta"]; ok {
		for k, v := range splitMessage(t, m) {
			if string(meta[k]) != string(v) {
				t.Errorf("answer to %d: _meta[%s] is %s, want %s", id, k, meta[k], v)
			}
		}
	}
	for k := range res {
		if _, ok := want[k]; !ok && !slices.Contains(relayDecoration[:], k) && k != "_meta" {
			t.Errorf("answer to %d: %s was added", id, k)
		}
	}
}

func TestRelayOverStdio(t *testing.T) {
	_, before := goroutines()
	t.Cleanup(func() { checkGoroutines(t, before) })
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "2025-11-25", true: "2026-07-28"}[modern], func(t *testing.T) {
			m := relayMux(relayServer())
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			served := make(chan error, 1)
			go func() {
				served <- m.ServeStdio(context.Background(), "reader", inR, outW)
				_ = outW.Close()
			}()
			lines := make(chan []byte)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(outR)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					lines <- slices.Clone(sc.Bytes())
				}
			}()
			send := func(s string) {
				if _, err := io.WriteString(inW, s+"\n"); err != nil {
					t.Fatal(err)
				}
			}
			if !modern {
				send(requestLine(0, mcp.MethodInitialize, `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`))
				send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			for i, r := range relayRequests {
				params := r.params
				if modern {
					params = modernParams(params)
				}
				send(requestLine(i+1, r.method, params))
			}
			answers := map[int][]byte{}
			timeout := time.After(testsupport.Wait)
			for len(answers) < len(relayRequests) {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatalf("stdout ended with %d answers", len(answers))
					}
					var head struct {
						ID     *int   `json:"id"`
						Method string `json:"method"`
					}
					if err := json.Unmarshal(line, &head); err != nil {
						t.Fatalf("%v: %s", err, line)
					}
					if head.ID != nil && *head.ID > 0 {
						answers[*head.ID] = line
					}
				case <-timeout:
					t.Fatalf("%d answers in %s", len(answers), testsupport.Wait)
				}
			}
			for i, r := range relayRequests {
				checkRelayed(t, answers[i+1], i+1, r.payload, modern)
			}
			_ = inW.Close()
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			for range lines {
			}
		})
	}
}

// relayPost posts one message to the HTTP upstream and returns the message
// that answers id, from a JSON body or an event stream, the session id the
// response names, and whether it was an event stream.
func relayPost(t *testing.T, url, sid string, id int, method mcp.MCPMethod, params string, modern bool) ([]byte, string, bool) {
	t.Helper()
	body := requestLine(id, method, params)
	if id == 0 {
		body = fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method)
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set(server.HeaderKeySessionID, sid)
	}
	if modern {
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		for k, v := range mcp.StandardHeaders(mcp.ProtocolVersion20260728, method, json.RawMessage(params)) {
			req.Header.Set(k, v)
		}
	} else if sid != "" {
		req.Header.Set(mcp.HeaderProtocolVersion, "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength >= 0 && resp.ContentLength != int64(len(b)) {
		t.Fatalf("Content-Length %d for a body of %d bytes", resp.ContentLength, len(b))
	}
	if id == 0 {
		return nil, "", false
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", method, resp.Status, b)
	}
	msgs := [][]byte{b}
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if sse {
		msgs = nil
		for _, line := range bytes.Split(b, []byte("\n")) {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				msgs = append(msgs, data)
			}
		}
	}
	for _, msg := range msgs {
		var head struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(msg, &head) == nil && head.ID != nil && *head.ID == id {
			return msg, resp.Header.Get(server.HeaderKeySessionID), sse
		}
	}
	t.Fatalf("no answer to %d in %s", id, b)
	return nil, "", false
}

func TestRelayOverHTTP(t *testing.T) {
	_, before := goroutines()
	t.Cleanup(func() { checkGoroutines(t, before) })
	m := relayMux(relayServer())
	_, url := serveLab(t, m, HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "reader" })

	t.Run("2025-11-25", func(t *testing.T) {
		_, sid, _ := relayPost(t, url, "", 1000, mcp.MethodInitialize, `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`, false)
		if sid == "" {
			t.Fatal("initialize opened no session")
		}
		relayPost(t, url, sid, 0, "notifications/initialized", "", false)
		for i, r := range relayRequests {
			msg, _, sse := relayPost(t, url, sid, i+1, r.method, r.params, false)
			if sse != r.needsSession() {
				t.Errorf("%s %s: answered as an event stream: %v", r.method, r.params, sse)
			}
			checkRelayed(t, msg, i+1, r.payload, false)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		for i, r := range relayRequests {
			if r.needsSession() {
				continue
			}
			msg, _, _ := relayPost(t, url, "", i+1, r.method, modernParams(r.params), true)
			checkRelayed(t, msg, i+1, r.payload, true)
		}
	})
}

// TestRelayDecoration holds relayDecoration to what mcp-go's decoration
// really adds: for every kind, the keys of a 2026-07-28 placeholder beyond
// those of a 2025-11-25 one are in it (or are _meta). A new key in a later
// mcp-go fails here rather than going missing from relayed results.
func TestRelayDecoration(t *testing.T) {
	srv := relayServer()
	lists := []relayRequest{
		{mcp.MethodToolsList, `{}`, ""},
		{mcp.MethodPromptsList, `{}`, ""},
		{mcp.MethodResourcesList, `{}`, ""},
		{mcp.MethodResourcesTemplatesList, `{}`, ""},
	}
	for i, r := range append(slices.Clone(relayRequests), lists...) {
		if r.needsSession() {
			continue
		}
		keys := func(params string) map[string]json.RawMessage {
			resp := srv.HandleMessage(context.Background(), json.RawMessage(requestLine(i+1, r.method, params)))
			b, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			top := splitMessage(t, b)
			if top["result"] == nil {
				t.Fatalf("%s: %s", r.method, b)
			}
			return splitMessage(t, top["result"])
		}
		legacy, modern := keys(r.params), keys(modernParams(r.params))
		for k := range modern {
			if _, ok := legacy[k]; !ok && k != "_meta" && !slices.Contains(relayDecoration[:], k) {
				t.Errorf("%s: mcp-go's decoration adds %q, which swapRelayed does not keep", r.method, k)
			}
		}
	}
}

// A placeholder returned by a tool run as a task (2025-11-25 tasks) comes
// back through tasks/result, where mcp-go adds the related-task entry to its
// _meta: the swap keeps that entry, which the payload lacks.
func TestRelayTaskResult(t *testing.T) {
	srv := server.NewMCPServer("mcpmux", "test", server.WithToolCapabilities(false), server.WithTaskCapabilities(true, true, true))
	srv.AddTool(mcp.NewTool("relay-task", mcp.WithTaskSupport(mcp.TaskSupportOptional)), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return relayToolResult(json.RawMessage(relayToolPayload)), nil
	})
	ask := func(id int, method mcp.MCPMethod, params string) []byte {
		b, err := json.Marshal(srv.HandleMessage(context.Background(), json.RawMessage(requestLine(id, method, params))))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var created struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	b := ask(1, mcp.MethodToolsCall, `{"name":"relay-task","arguments":{},"task":{"ttl":60000}}`)
	if err := json.Unmarshal(b, &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("no task: %s", b)
	}
	out, ok := swapRelayed(ask(2, mcp.MethodTasksResult, fmt.Sprintf(`{"taskId":%q}`, created.Result.Task.TaskID)))
	if !ok {
		t.Fatalf("not swapped: %s", out)
	}
	res := splitMessage(t, splitMessage(t, out)["result"])
	for k, v := range splitMessage(t, []byte(relayToolPayload)) {
		if k != "_meta" && string(res[k]) != string(v) {
			t.Errorf("%s is %s, want %s", k, res[k], v)
		}
	}
	meta := splitMessage(t, res["_meta"])
	if meta[mcp.RelatedTaskMetaKey] == nil || string(meta["big"]) != "12345678901234567890" || meta[relayKey] != nil {
		t.Errorf("_meta %s", res["_meta"])
	}
}
