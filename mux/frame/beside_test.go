package frame

// These tests run a real mcp-go server beside package frame on the same
// messages and compare what each reads: the day mcp-go reads a request
// otherwise (its protocol info, its params, the decoration of a
// 2026-07-28 result, the HTTP status of an error), they fail.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// seen is what mcp-go's server saw of one request.
type seen struct {
	info *server.RequestProtocolInfo
	call *mcp.CallToolRequest
}

// beside is a real mcp-go server with one tool, echo, that records what it
// sees of each request by its id.
type beside struct {
	srv *server.MCPServer
	mu  sync.Mutex
	by  map[string]*seen
}

func newBeside(t *testing.T, result *mcp.CallToolResult) *beside {
	t.Helper()
	b := &beside{by: map[string]*seen{}}
	hooks := &server.Hooks{}
	hooks.AddBeforeAny(func(ctx context.Context, id any, _ mcp.MCPMethod, _ any) {
		b.record(id).info = server.RequestProtocolInfoFromContext(ctx)
	})
	hooks.AddBeforeCallTool(func(_ context.Context, id any, req *mcp.CallToolRequest) {
		c := *req
		b.record(id).call = &c
	})
	b.srv = server.NewMCPServer("mcpmux", "9", server.WithToolCapabilities(false), server.WithHooks(hooks))
	b.srv.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return result, nil
	})
	return b
}

func (b *beside) record(id any) *seen {
	key := fmt.Sprint(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by[key] == nil {
		b.by[key] = &seen{}
	}
	return b.by[key]
}

// handle has mcp-go answer msg on an initialized session and returns the
// answer's JSON and what it saw.
func (b *beside) handle(t *testing.T, msg string) ([]byte, *seen) {
	t.Helper()
	b.mu.Lock()
	b.by = map[string]*seen{}
	b.mu.Unlock()
	resp := b.srv.HandleMessage(context.Background(), json.RawMessage(msg))
	out, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.by {
		return out, s
	}
	return out, nil
}

const modernMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`

// metaCases are the _meta of tools/call requests, as clients write them
// and as they should not.
var metaCases = []string{
	``,
	`{}`,
	`{"progressToken":"p1"}`,
	`{"progressToken":7,"com.example/k":{"a":[1,2]}}`,
	`{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}`,
	`{` + modernMeta + `}`,
	`{` + modernMeta + `,"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1.2"},"io.modelcontextprotocol/logLevel":"warning"}`,
	`{` + modernMeta + `,"progressToken":"t","x":1}`,
	`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`,
	`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":3}`,
	`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"roots":{"listChanged":true},"elicitation":{"form":{}}}}`,
	`{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}`,
	`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":"no"}`,
	`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":5}`,
	`{"io.modelcontextprotocol/protocolVersion":7}`,
}

// TestProtocolAsMcpGoReadsIt: the protocol info, the progress token and
// the refusals package frame reads from a request's _meta are mcp-go's.
func TestProtocolAsMcpGoReadsIt(t *testing.T) {
	b := newBeside(t, mcp.NewToolResultText("ok"))
	for i, meta := range metaCases {
		params := `{"name":"echo","arguments":{"n":1}`
		if meta != "" {
			params += `,"_meta":` + meta
		}
		params += `}`
		msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, params)
		t.Run(meta, func(t *testing.T) {
			answer, s := b.handle(t, msg)
			f := Read([]byte(msg))
			if f.Kind != Request || f.Method != "tools/call" || string(f.ID) != fmt.Sprint(i) {
				t.Fatalf("Read: %+v", f)
			}
			p, perr := ReadParams(f.Method, f.Params)
			if perr != nil {
				t.Fatalf("ReadParams: %v", perr)
			}
			m, merr := ReadMeta(p.Meta)
			var refused struct {
				Error *mcp.JSONRPCErrorDetails `json:"error"`
			}
			_ = json.Unmarshal(answer, &refused)
			switch {
			case refused.Error != nil && merr == nil:
				t.Fatalf("mcp-go refused it (%d %q), frame did not", refused.Error.Code, refused.Error.Message)
			case refused.Error != nil:
				if merr.Code != refused.Error.Code || merr.Message != refused.Error.Message {
					t.Errorf("refusal %d %q, mcp-go's %d %q", merr.Code, merr.Message, refused.Error.Code, refused.Error.Message)
				}
				var theirs any
				if refused.Error.Data != nil {
					d, _ := json.Marshal(refused.Error.Data)
					_ = json.Unmarshal(d, &theirs)
				}
				var ours any
				if merr.Data != nil {
					_ = json.Unmarshal(merr.Data, &ours)
				}
				if !reflect.DeepEqual(ours, theirs) {
					t.Errorf("refusal data %v, mcp-go's %v", ours, theirs)
				}
				return
			case merr != nil:
				t.Fatalf("frame refused it (%d %q), mcp-go answered %s", merr.Code, merr.Message, answer)
			}
			if s == nil || s.info == nil || s.call == nil {
				t.Fatalf("mcp-go's hooks saw nothing: %s", answer)
			}
			want := s.info
			got := m.Protocol
			if got.Modern != want.Modern || got.Version != want.ProtocolVersion || got.LogLevel != want.LogLevel ||
				!reflect.DeepEqual(got.Client, want.ClientInfo) || !reflect.DeepEqual(got.Caps, want.ClientCapabilities) {
				t.Errorf("protocol %+v, mcp-go's %+v", got, *want)
			}
			var token any
			if m.Token != nil {
				_ = json.Unmarshal(m.Token, &token)
			}
			var theirToken any
			if s.call.Params.Meta != nil {
				theirToken = s.call.Params.Meta.ProgressToken
			}
			if !reflect.DeepEqual(token, theirToken) {
				t.Errorf("progress token %v, mcp-go's %v", token, theirToken)
			}
			if p.Name != s.call.Params.Name || !bytes.Equal(p.Arguments, s.call.Params.RawArguments) {
				t.Errorf("name %q arguments %s, mcp-go's %q %s", p.Name, p.Arguments, s.call.Params.Name, s.call.Params.RawArguments)
			}
		})
	}
}

// TestParamsAsMcpGoReadsThem: the params of every request mcpmux answers,
// as clients write them, read as mcp-go's typed requests read them.
func TestParamsAsMcpGoReadsThem(t *testing.T) {
	cases := []struct {
		method, params string
		check          func(t *testing.T, p Params, raw []byte)
	}{
		{"tools/call", `{"name":"a__b","arguments":{"x":12345678901234567890},"task":{"ttl":5},"requestState":"s","inputResponses":{"1":{"a":1}}}`,
			func(t *testing.T, p Params, raw []byte) {
				var r mcp.CallToolRequest
				mustUnmarshal(t, raw, &r)
				if p.Name != r.Params.Name || !bytes.Equal(p.Arguments, r.Params.RawArguments) || p.RequestState != r.Params.RequestState ||
					r.Params.Task == nil || *r.Params.Task.TTL != 5 || len(r.Params.InputResponses) != 1 || p.Task == nil || p.InputResponses == nil {
					t.Errorf("%+v, mcp-go's %+v", p, r.Params)
				}
			}},
		{"prompts/get", `{"name":"p\u00e9","arguments":{"k":"v"}}`, func(t *testing.T, p Params, raw []byte) {
			var r mcp.GetPromptRequest
			mustUnmarshal(t, raw, &r)
			if p.Name != r.Params.Name || r.Params.Arguments["k"] != "v" {
				t.Errorf("%+v, mcp-go's %+v", p, r.Params)
			}
		}},
		{"resources/read", `{"uri":"mcpmux://docs/file:///a b"}`, func(t *testing.T, p Params, raw []byte) {
			var r mcp.ReadResourceRequest
			mustUnmarshal(t, raw, &r)
			if p.URI != r.Params.URI {
				t.Errorf("%+v, mcp-go's %+v", p, r.Params)
			}
		}},
		{"tools/list", `{"cursor":"bWNwbXV4OjQ="}`, func(t *testing.T, p Params, raw []byte) {
			var r mcp.ListToolsRequest
			mustUnmarshal(t, raw, &r)
			if p.Cursor != string(r.Params.Cursor) {
				t.Errorf("%+v, mcp-go's %+v", p, r.Params)
			}
		}},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"v"},"context":{"arguments":{"b":"c"}}}`,
			func(t *testing.T, p Params, raw []byte) {
				var r mcp.CompleteRequest
				mustUnmarshal(t, raw, &r)
				if r.Params.Argument.Name != "a" || p.Ref == nil || p.Argument == nil || p.Context == nil {
					t.Errorf("%+v, mcp-go's %+v", p, r.Params)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.method, func(t *testing.T) {
			msg := `{"jsonrpc":"2.0","id":1,"method":"` + c.method + `","params":` + c.params + `}`
			f := Read([]byte(msg))
			if f.Kind != Request {
				t.Fatalf("Read: %+v", f)
			}
			p, err := ReadParams(f.Method, f.Params)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, p, []byte(msg))
		})
	}
}

func mustUnmarshal(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
}

// TestDecorationAsMcpGoWritesIt: a 2026-07-28 result decorated by package
// frame is, as JSON, the result mcp-go's server writes for the same result
// to the same request, and a 2025-11-25 result is left as it is.
func TestDecorationAsMcpGoWritesIt(t *testing.T) {
	structured := mcp.NewToolResultStructured(map[string]any{"n": 1.5}, "s")
	structured.Meta = mcp.NewMetaFromMap(map[string]any{"com.example/k": "v"})
	for name, res := range map[string]*mcp.CallToolResult{
		"text":       mcp.NewToolResultText("<a> & b"),
		"error":      mcp.NewToolResultError("no"),
		"structured": structured,
	} {
		t.Run(name, func(t *testing.T) {
			b := newBeside(t, res)
			legacy, _ := b.handle(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`)
			modern, _ := b.handle(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{`+modernMeta+`}}}`)
			plain := resultOf(t, legacy)
			d := Decoration{Server: mcp.Implementation{Name: "mcpmux", Version: "9"}}
			if got, want := decoded(t, d.Decorate(plain, "tools/call")), decoded(t, resultOf(t, modern)); !reflect.DeepEqual(got, want) {
				t.Errorf("decorated %v\nmcp-go's  %v", got, want)
			}
			// A result of mcpmux's own, decorated as a value: the very bytes.
			var own mcp.CallToolResult
			mustUnmarshal(t, plain, &own)
			d.DecorateOwn(&own, "tools/call")
			if got, _ := json.Marshal(&own); string(got) != string(resultOf(t, modern)) {
				t.Errorf("decorated own %s\nmcp-go's      %s", got, resultOf(t, modern))
			}
		})
	}
	// The lists: mcp-go's own, in both eras.
	b := newBeside(t, nil)
	legacy, _ := b.handle(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	modern, _ := b.handle(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{`+modernMeta+`}}}`)
	d := Decoration{Server: mcp.Implementation{Name: "mcpmux", Version: "9"}}
	if got, want := decoded(t, d.Decorate(resultOf(t, legacy), "tools/list")), decoded(t, resultOf(t, modern)); !reflect.DeepEqual(got, want) {
		t.Errorf("decorated list %v\nmcp-go's       %v", got, want)
	}
}

func resultOf(t *testing.T, answer []byte) []byte {
	t.Helper()
	var a struct{ Result json.RawMessage }
	mustUnmarshal(t, answer, &a)
	if a.Result == nil {
		t.Fatalf("no result: %s", answer)
	}
	return a.Result
}

func decoded(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	mustUnmarshal(t, b, &v)
	return v
}

// TestHTTPStatusAsMcpGoAnswersIt: the status of a 2026-07-28 error answer
// over HTTP is the one mcp-go's streamable HTTP server gives it.
func TestHTTPStatusAsMcpGoAnswersIt(t *testing.T) {
	srv := server.NewMCPServer("mcpmux", "9", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	defer hs.Close()
	meta := `"_meta":{` + modernMeta + `}`
	codes := map[int]bool{}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"nope/nope","params":{` + meta + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"nope",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`,
	} {
		f := Read([]byte(body))
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		for k, v := range mcp.StandardHeaders(mcp.ProtocolVersion20260728, mcp.MCPMethod(f.Method), f.Params) {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Error *mcp.JSONRPCErrorDetails `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&a)
		_ = resp.Body.Close()
		code := 0
		if a.Error != nil {
			code = a.Error.Code
		}
		codes[code] = true
		if got := HTTPStatus(code); got != resp.StatusCode {
			t.Errorf("%s: HTTPStatus(%d) = %d, mcp-go answered %d", body, code, got, resp.StatusCode)
		}
	}
	// Each kind of answer came: a result, and errors of each status.
	for _, code := range []int{0, mcp.METHOD_NOT_FOUND, mcp.INVALID_PARAMS, mcp.HEADER_MISMATCH} {
		if !codes[code] {
			t.Errorf("no answer with code %d among %v", code, codes)
		}
	}
}
