package main

// The catalog side of protocol fidelity, offered with LAB_FIDELITY=1:
// prompts, resources, a resource template, subscriptions, completion, and
// tools whose results and definitions carry what mcp-go's typed structs
// cannot (unknown fields, annotations as written, numbers beyond float64).
// Those are written raw by rawWriter, on the stdio transport only.
//
// Prompts:
//
//	brief {topic (required), style}: a text message, an embedded resource
//	      (readme) and a resource_link (the note of topic)
//	greet                           a text message
//	internal_notes                  a text message (for hide globs)
//	extra_prompt                    toggled by toggle_prompt
//
// Resources (the URIs name no source: two labservers list the same ones;
// the contents say which one answered):
//
//	file:///lab/readme.txt  text "<source>: readme"
//	file:///lab/pixel.png   blob (base64 of the PNG signature)
//	file:///lab/extra.txt   toggled by toggle_resource
//	lab://notes/{name}      template: text "<source>: note <name>"
//	lab://items/{id}{?fmt}  template: text "<source>: item <id> <fmt>"
//
// Completion: brief's style from {formal, friendly, short}; the notes
// template's name from {alpha, alpine, beta}; both by prefix.
//
// Tools:
//
//	link_resource      text, a resource_link to readme, the pixel embedded
//	verbatim           a result with fields no spec defines at every level
//	odd_annotations    defined with an unknown annotation key
//	bare               defined with no annotations at all
//	touch {uri}        notifications/resources/updated for uri, when subscribed;
//	                   over stdio it answers once that notification is written,
//	                   so that the client gets the two in that order
//	toggle_prompt      adds or removes extra_prompt (prompts/list_changed)
//	toggle_resource    adds or removes extra.txt (resources/list_changed)
//
// With LAB_REQUESTS set, every request the server receives is appended to
// that file as one JSON line {"method","params"}, written with one
// write(2), before it is handled: a test reads there what reached the child.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const (
	readmeURI = "file:///lab/readme.txt"
	pixelURI  = "file:///lab/pixel.png"
	extraURI  = "file:///lab/extra.txt"
	notesTmpl = "lab://notes/{name}"
	itemsTmpl = "lab://items/{id}{?fmt}"
)

// VerbatimResult is what the verbatim tool answers, byte for byte: fields
// no spec defines at the top, in content items, in annotations and in
// _meta, a number beyond float64, and characters encoding/json escapes.
const VerbatimResult = `{"content":[{"type":"text","text":"a & b <c>","x-lab-item":{"deep":[1,2.50,{"k":null}]},"annotations":{"audience":["user"],"x-lab-ann":"kept"},"_meta":{"lab.big":12345678901234567890}},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png","x-lab-image":true}],"structuredContent":{"big":12345678901234567890,"nested":{"x-lab":"<&>"}},"isError":false,"_meta":{"lab.big":12345678901234567890,"lab.float":1.0e+300},"x-lab-top":{"list":[],"obj":{}}}`

// rawTools are tool definitions as listed, in place of what mcp-go would
// write for them.
var rawTools = map[string]string{
	"odd_annotations": `{"name":"odd_annotations","description":"Annotations with a key no spec defines.","inputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true,"x-lab-hint":{"why":["unknown",12345678901234567890]},"title":"Odd"}}`,
	"bare":            `{"name":"bare","description":"No annotations at all.","inputSchema":{"type":"object","properties":{}}}`,
}

// rawMarker is the _meta key of a result rawWriter replaces with
// rawResults[value].
const rawMarker = "lab.raw"

var rawResults = map[string]string{"verbatim": VerbatimResult}

// rawWriter writes each JSON-RPC message mcp-go's stdio server writes
// (one Write per line), after putting raw results and raw tool
// definitions in place of mcp-go's.
type rawWriter struct {
	w io.Writer
}

func (r rawWriter) Write(p []byte) (int, error) {
	line := bytes.TrimRight(p, "\n")
	out, ok := rewriteRaw(line)
	if !ok {
		return r.w.Write(p)
	}
	if _, err := r.w.Write(append(out, '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rewriteRaw returns msg with its raw parts in place, or false when it has
// none.
func rewriteRaw(msg []byte) ([]byte, bool) {
	if !bytes.Contains(msg, []byte(`"result"`)) {
		return nil, false
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(msg, &m) != nil || m.ID == nil || m.Result == nil {
		return nil, false
	}
	var res struct {
		Meta  map[string]json.RawMessage `json:"_meta"`
		Tools []json.RawMessage          `json:"tools"`
	}
	if json.Unmarshal(m.Result, &res) != nil {
		return nil, false
	}
	result := ""
	if k, ok := res.Meta[rawMarker]; ok {
		var key string
		_ = json.Unmarshal(k, &key)
		result = rawResults[key]
	} else if res.Tools != nil {
		result = rawToolList(m.Result)
	}
	if result == "" {
		return nil, false
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`), true
}

// rawToolList returns a tools/list result with the definitions of rawTools
// in place of mcp-go's, every other member as mcp-go wrote it; "" when none
// is listed.
func rawToolList(result json.RawMessage) string {
	var members map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(result, &members) != nil || json.Unmarshal(members["tools"], &tools) != nil {
		return ""
	}
	changed := false
	defs := make([]string, len(tools))
	for i, t := range tools {
		var head struct{ Name string }
		_ = json.Unmarshal(t, &head)
		if raw, ok := rawTools[head.Name]; ok {
			defs[i], changed = raw, true
		} else {
			defs[i] = string(t)
		}
	}
	if !changed {
		return ""
	}
	var b strings.Builder
	b.WriteString(`{"tools":[` + strings.Join(defs, ",") + `]`)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range members {
			if !yield(k) {
				return
			}
		}
	}) {
		if k == "tools" {
			continue
		}
		key, _ := json.Marshal(k)
		b.WriteString("," + string(key) + ":" + string(members[k]))
	}
	b.WriteString("}")
	return b.String()
}

// fidelityOptions are the server options LAB_FIDELITY adds.
func fidelityOptions() []server.ServerOption {
	return []server.ServerOption{
		server.WithPromptCapabilities(true),
		server.WithResourceCapabilities(true, true),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completions{}),
		server.WithResourceCompletionProvider(completions{}),
	}
}

// recordRequests makes hooks append every request to the file path.
func recordRequests(hooks *server.Hooks, path string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	hooks.AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
		raw, ok := message.(json.RawMessage)
		if !ok {
			return nil
		}
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}
		if json.Unmarshal(raw, &req) != nil {
			return nil
		}
		line, _ := json.Marshal(req)
		_, _ = f.Write(append(line, '\n'))
		return nil
	})
	return nil
}

// subscribed is the set of URIs the client subscribed to.
type subscribed struct {
	mu   sync.Mutex
	uris map[string]bool
}

func (s *subscribed) set(uri string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.uris[uri] = true
	} else {
		delete(s.uris, uri)
	}
}

func (s *subscribed) has(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uris[uri]
}

// trackSubscriptions makes hooks keep subs.
func trackSubscriptions(hooks *server.Hooks, subs *subscribed) {
	hooks.AddAfterSubscribe(func(_ context.Context, _ any, req *mcp.SubscribeRequest, _ *mcp.EmptyResult) {
		subs.set(req.Params.URI, true)
	})
	hooks.AddAfterUnsubscribe(func(_ context.Context, _ any, req *mcp.UnsubscribeRequest, _ *mcp.EmptyResult) {
		subs.set(req.Params.URI, false)
	})
}

// completions completes brief's style and the notes template's name.
type completions struct{}

var (
	styles    = []string{"formal", "friendly", "short"}
	noteNames = []string{"alpha", "alpine", "beta"}
)

func byPrefix(all []string, prefix string) *mcp.Completion {
	c := &mcp.Completion{Values: []string{}}
	for _, v := range all {
		if strings.HasPrefix(v, prefix) {
			c.Values = append(c.Values, v)
		}
	}
	c.Total = len(c.Values)
	return c
}

func (completions) CompletePromptArgument(_ context.Context, name string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if name != "brief" || arg.Name != "style" {
		return nil, fmt.Errorf("no completion for prompt %q argument %q", name, arg.Name)
	}
	return byPrefix(styles, arg.Value), nil
}

func (completions) CompleteResourceArgument(_ context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if uri != notesTmpl || arg.Name != "name" {
		return nil, fmt.Errorf("no completion for template %q variable %q", uri, arg.Name)
	}
	return byPrefix(noteNames, arg.Value), nil
}

func textMessage(text string) mcp.PromptMessage {
	return mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text))
}

func staticText(uri, text string) server.ResourceHandlerFunc {
	return func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: text}}, nil
	}
}

// pixel is the blob of pixelURI.
var pixel = base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))

// registerFidelity adds the prompts, resources, templates and tools above.
func registerFidelity(s *server.MCPServer, source string, subs *subscribed) {
	s.AddPrompt(mcp.NewPrompt("brief",
		mcp.WithPromptDescription("A brief on a topic, with the readme embedded and a link to the topic's note."),
		mcp.WithArgument("topic", mcp.RequiredArgument()),
		mcp.WithArgument("style", mcp.ArgumentDescription("formal, friendly or short")),
	), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		topic, style := req.Params.Arguments["topic"], req.Params.Arguments["style"]
		if topic == "" {
			return nil, fmt.Errorf("topic is required")
		}
		return mcp.NewGetPromptResult("brief", []mcp.PromptMessage{
			textMessage(fmt.Sprintf("%s: brief on %s (%s)", source, topic, style)),
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: readmeURI, MIMEType: "text/plain", Text: source + ": readme"})),
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewResourceLink("lab://notes/"+topic, "note", "the topic's note", "text/plain")),
		}), nil
	})
	for _, name := range []string{"greet", "internal_notes"} {
		s.AddPrompt(mcp.NewPrompt(name, mcp.WithPromptDescription("A fixed message.")),
			func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return mcp.NewGetPromptResult(name, []mcp.PromptMessage{textMessage(source + ": " + name)}), nil
			})
	}

	s.AddResource(mcp.NewResource(readmeURI, "readme", mcp.WithMIMEType("text/plain")), staticText(readmeURI, source+": readme"))
	s.AddResource(mcp.NewResource(pixelURI, "pixel", mcp.WithMIMEType("image/png")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.BlobResourceContents{URI: pixelURI, MIMEType: "image/png", Blob: pixel}}, nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate(notesTmpl, "note", mcp.WithTemplateMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			name, _ := strings.CutPrefix(req.Params.URI, "lab://notes/")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: source + ": note " + name}}, nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate(itemsTmpl, "item", mcp.WithTemplateMIMEType("text/plain")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			id, fmtArg, _ := strings.Cut(strings.TrimPrefix(req.Params.URI, "lab://items/"), "?fmt=")
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: source + ": item " + id + " " + fmtArg}}, nil
		})

	s.AddTool(mcp.NewTool("link_resource",
		mcp.WithDescription("Answer with a link to the readme and the pixel embedded."),
		mcp.WithToolAnnotation(annotations(true, false)),
	), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{
			mcp.NewTextContent(source + ": links"),
			mcp.NewResourceLink(readmeURI, "readme", "the readme", "text/plain"),
			mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: pixelURI, MIMEType: "image/png", Blob: pixel}),
		}}, nil
	})
	raw := func(key string) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Result:  mcp.Result{Meta: &mcp.Meta{AdditionalFields: map[string]any{rawMarker: key}}},
				Content: []mcp.Content{mcp.NewTextContent("raw " + key + " (written raw over stdio only)")},
			}, nil
		}
	}
	s.AddTool(mcp.NewTool("verbatim", mcp.WithDescription("A result with fields no spec defines.")), raw("verbatim"))
	for name := range rawTools {
		s.AddTool(mcp.NewTool(name, mcp.WithDescription("Defined raw over stdio.")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(source + ": " + name), nil
			})
	}

	s.AddTool(mcp.NewTool("touch",
		mcp.WithDescription("Send notifications/resources/updated for uri, if the client subscribed to it."),
		mcp.WithString("uri", mcp.Required()),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		uri := req.GetString("uri", "")
		if !subs.has(uri) {
			return mcp.NewToolResultText("not subscribed: " + uri), nil
		}
		if err := updates.wait(func() error {
			return s.SendNotificationToClient(ctx, string(mcp.MethodNotificationResourceUpdated),
				map[string]any{"uri": uri, "x-lab-note": "kept"})
		}); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("notified: " + uri), nil
	})

	var mu sync.Mutex
	promptOn, resourceOn := false, false
	s.AddTool(mcp.NewTool("toggle_prompt",
		mcp.WithDescription("Add or remove extra_prompt, which sends notifications/prompts/list_changed."),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if promptOn = !promptOn; !promptOn {
			s.DeletePrompts("extra_prompt")
			return mcp.NewToolResultText("extra_prompt off"), nil
		}
		s.AddPrompt(mcp.NewPrompt("extra_prompt"), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("extra", []mcp.PromptMessage{textMessage(source + ": extra")}), nil
		})
		return mcp.NewToolResultText("extra_prompt on"), nil
	})
	s.AddTool(mcp.NewTool("toggle_resource",
		mcp.WithDescription("Add or remove extra.txt, which sends notifications/resources/list_changed."),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if resourceOn = !resourceOn; !resourceOn {
			s.DeleteResources(extraURI)
			return mcp.NewToolResultText("extra.txt off"), nil
		}
		s.AddResource(mcp.NewResource(extraURI, "extra"), staticText(extraURI, source+": extra"))
		return mcp.NewToolResultText("extra.txt on"), nil
	})
}

// updateCounter counts the notifications/resources/updated lines a stdio
// server has written, so that touch answers only once its notification is
// out: mcp-go's stdio server writes notifications from another goroutine
// than answers, and would otherwise let the answer overtake it.
type updateCounter struct {
	w       io.Writer
	mu      sync.Mutex
	cond    *sync.Cond
	on      bool // serving stdio through Write
	written int
}

// updates is stdout's counter; without stdio (over HTTP, where mcp-go
// orders a request's stream itself) wait only sends.
var updates = newUpdateCounter()

func newUpdateCounter() *updateCounter {
	u := &updateCounter{}
	u.cond = sync.NewCond(&u.mu)
	return u
}

func (u *updateCounter) Write(p []byte) (int, error) {
	n, err := u.w.Write(p)
	if bytes.Contains(p, []byte(`"method":"`+string(mcp.MethodNotificationResourceUpdated)+`"`)) {
		u.mu.Lock()
		u.written++
		u.cond.Broadcast()
		u.mu.Unlock()
	}
	return n, err
}

// wait runs send, which sends one notifications/resources/updated, and
// once it has sent it, returns once one more notification of that method
// has been written; it returns send's error.
func (u *updateCounter) wait(send func() error) error {
	u.mu.Lock()
	target := u.written + 1
	on := u.on
	u.mu.Unlock()
	if err := send(); err != nil || !on {
		return err
	}
	u.mu.Lock()
	for u.written < target {
		u.cond.Wait()
	}
	u.mu.Unlock()
	return nil
}

// serveStdio serves s on stdin and stdout, through rawWriter when raw is
// set, until stdin ends or SIGTERM or SIGINT arrives (as server.ServeStdio
// does).
func serveStdio(s *server.MCPServer, raw bool) error {
	ss := server.NewStdioServer(s)
	// The default stdio worker pool runs only 5 tool calls at a time; raise it
	// to the maximum so concurrency limits seen in tests are mcpmux's own.
	server.WithWorkerPoolSize(100)(ss)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var out io.Writer = os.Stdout
	if raw {
		out = rawWriter{os.Stdout}
	}
	updates.mu.Lock()
	updates.w, updates.on = out, true
	updates.mu.Unlock()
	return ss.Listen(ctx, os.Stdin, updates)
}
