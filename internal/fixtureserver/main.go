// Command fixtureserver is the MCP server that the official conformance
// suite (@modelcontextprotocol/conformance 0.1.16) expects to find behind
// its server scenarios: every tool, prompt, resource, resource template and
// completion those scenarios call by a fixed name, with the content they
// check. interop/conformance.mjs runs the suite against it directly and
// through mcpmux, which fronts it as a child with prefix = false.
//
// It is built with mcp-go's server package and serves either streamable
// HTTP at /mcp or stdio:
//
//	fixtureserver -listen 127.0.0.1:0   the first line of stdout is the URL bound
//	fixtureserver -stdio
//
// Over HTTP, mcp-go v1.2.1 makes two behaviours exclusive, so the fixture
// picks one with -standalone-stream:
//   - It sends sampling/createMessage (and roots/list) only on the
//     standalone GET stream; elicitation goes on the call's POST stream.
//   - It puts all of a session's notifications on one channel that the POST
//     stream of each call in flight and the GET stream read alike, so with a
//     GET stream open a call's progress can leave on the GET stream and reach
//     the client after the call's answer, when the client no longer wants it.
//
// By default GET is answered 405, so every call's notifications travel on
// its own POST stream, ahead of its answer, and sampling cannot be asked for.
// With -standalone-stream, GET opens the stream: sampling works, and progress
// may arrive late. interop/conformance.mjs runs tools-call-sampling against a
// fixture started with the flag and every other scenario against one without.
//
// Over HTTP it keeps mcp-go's DNS rebinding protection (a loopback listener
// refuses a non-loopback Host header), which the dns-rebinding-protection
// scenario checks.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// redPixelPNG is a 1x1 PNG, the "minimal test image" the scenarios ask for.
const redPixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

// stepDelay is the pause between the notifications of the logging and
// progress tools: the scenarios ask for about 50 ms, so that a client sees
// the notifications arrive during the call rather than with its answer.
const stepDelay = 50 * time.Millisecond

const schema2020 = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {
    "address": {
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
    }
  },
  "properties": {
    "name": {"type": "string"},
    "address": {"$ref": "#/$defs/address"}
  },
  "additionalProperties": false
}`

const userInfoSchema = `{
  "type": "object",
  "properties": {
    "username": {"type": "string", "description": "User's response"},
    "email": {"type": "string", "description": "User's email address"}
  },
  "required": ["username", "email"]
}`

// sep1034Schema has a default for every primitive type (SEP-1034).
const sep1034Schema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "description": "User name", "default": "John Doe"},
    "age": {"type": "integer", "description": "User age", "default": 30},
    "score": {"type": "number", "description": "User score", "default": 95.5},
    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
    "verified": {"type": "boolean", "description": "Verification status", "default": true}
  }
}`

// sep1330Schema has the five enum variants of SEP-1330.
const sep1330Schema = `{
  "type": "object",
  "properties": {
    "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
    "titledSingle": {"type": "string", "oneOf": [
      {"const": "value1", "title": "First Option"},
      {"const": "value2", "title": "Second Option"},
      {"const": "value3", "title": "Third Option"}
    ]},
    "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
    "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
    "titledMulti": {"type": "array", "items": {"anyOf": [
      {"const": "value1", "title": "First Choice"},
      {"const": "value2", "title": "Second Choice"},
      {"const": "value3", "title": "Third Choice"}
    ]}}
  }
}`

func main() {
	listen := flag.String("listen", "", "serve streamable HTTP at /mcp on this address (host:port; port 0 picks one) and print its URL")
	stdio := flag.Bool("stdio", false, "serve MCP over stdin and stdout")
	standaloneStream := flag.Bool("standalone-stream", false, "with -listen, answer GET with the standalone SSE stream (needed for sampling; lets a call's notifications leave on it)")
	flag.Parse()
	if (*listen == "") == !*stdio {
		fmt.Fprintln(os.Stderr, "fixtureserver: give exactly one of -listen ADDR and -stdio")
		os.Exit(2)
	}

	s := newServer()
	var err error
	if *stdio {
		err = server.ServeStdio(s, server.WithWorkerPoolSize(100))
	} else {
		err = serveHTTP(s, *listen, *standaloneStream)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "fixtureserver: %v\n", err)
		os.Exit(1)
	}
}

// serveHTTP serves s at /mcp on addr until SIGINT or SIGTERM, after printing
// the endpoint's URL as the first line of stdout. GET opens the standalone
// stream only when standaloneStream is set (see the package comment).
func serveHTTP(s *server.MCPServer, addr string, standaloneStream bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	// Without an event store, a notification sent just before a tool
	// returns can be taken off the session's channel by the POST stream's
	// forwarder after the response path has drained that channel, and be
	// dropped; with one, the forwarder still delivers it ahead of the answer.
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s,
		server.WithDisableStreaming(!standaloneStream),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithSessionIdleTTL(10*time.Minute)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("http://%s/mcp\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-served
	return nil
}

func newServer() *server.MCPServer {
	s := server.NewMCPServer("mcpmux-conformance-fixture", "1.0.0",
		server.WithToolCapabilities(false),
		server.WithPromptCapabilities(false),
		server.WithResourceCapabilities(true, false),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completions{}),
		server.WithResourceCompletionProvider(completions{}),
	)
	addTools(s)
	addPrompts(s)
	addResources(s)
	return s
}

func tool(name, description string) mcp.Tool {
	return mcp.NewTool(name, mcp.WithDescription(description))
}

func addTools(s *server.MCPServer) {
	s.AddTool(tool("test_simple_text", "Returns a simple text response"),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("This is a simple text response for testing."), nil
		})
	s.AddTool(tool("test_image_content", "Returns a 1x1 PNG image"),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return result(mcp.NewImageContent(redPixelPNG, "image/png")), nil
		})
	s.AddTool(tool("test_audio_content", "Returns a short WAV clip"),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return result(mcp.NewAudioContent(silentWAV(), "audio/wav")), nil
		})
	s.AddTool(tool("test_embedded_resource", "Returns an embedded text resource"),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return result(mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: "test://embedded-resource", MIMEType: "text/plain",
				Text: "This is an embedded resource content.",
			})), nil
		})
	s.AddTool(tool("test_multiple_content_types", "Returns text, an image and an embedded resource"),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return result(
				mcp.NewTextContent("Multiple content types test:"),
				mcp.NewImageContent(redPixelPNG, "image/png"),
				mcp.NewEmbeddedResource(mcp.TextResourceContents{
					URI: "test://mixed-content-resource", MIMEType: "application/json",
					Text: `{"test":"data","value":123}`,
				}),
			), nil
		})
	s.AddTool(tool("test_error_handling", "Always answers with an error result"),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("This tool intentionally returns an error for testing"), nil
		})
	s.AddTool(tool("test_tool_with_logging", "Sends three info log messages while it runs"),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 {
					if err := pause(ctx); err != nil {
						return nil, err
					}
				}
				note := mcp.NewLoggingMessageNotification(mcp.LoggingLevelInfo, "fixture", msg)
				if err := server.ServerFromContext(ctx).SendLogMessageToClient(ctx, note); err != nil {
					return nil, fmt.Errorf("log %q: %w", msg, err)
				}
			}
			return mcp.NewToolResultText("Tool with logging executed successfully"), nil
		})
	s.AddTool(tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 when asked for progress"),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var token mcp.ProgressToken
			if req.Params.Meta != nil {
				token = req.Params.Meta.ProgressToken
			}
			for i, progress := range []int{0, 50, 100} {
				if i > 0 {
					if err := pause(ctx); err != nil {
						return nil, err
					}
				}
				if token == nil {
					continue
				}
				err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
					map[string]any{"progressToken": token, "progress": progress, "total": 100})
				if err != nil {
					return nil, fmt.Errorf("progress %d: %w", progress, err)
				}
			}
			return mcp.NewToolResultText("Tool with progress executed successfully"), nil
		})
	s.AddTool(mcp.NewTool("test_sampling",
		mcp.WithDescription("Asks the client to sample an LLM with the prompt given"),
		mcp.WithString("prompt", mcp.Required(), mcp.Description("The prompt to send to the LLM")),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		prompt, err := req.RequireString("prompt")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		res, err := server.ServerFromContext(ctx).RequestSampling(ctx, mcp.CreateMessageRequest{
			CreateMessageParams: mcp.CreateMessageParams{
				Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent(prompt)}},
				MaxTokens: 100,
			},
		})
		if err != nil {
			return mcp.NewToolResultError("sampling failed: " + err.Error()), nil
		}
		return mcp.NewToolResultText("LLM response: " + samplingText(res)), nil
	})
	s.AddTool(mcp.NewTool("test_elicitation",
		mcp.WithDescription("Asks the client for a username and an email address"),
		mcp.WithString("message", mcp.Required(), mcp.Description("The message to show the user")),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		message, err := req.RequireString("message")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return elicit(ctx, message, userInfoSchema, "User response: ")
	})
	s.AddTool(tool("test_elicitation_sep1034_defaults", "Elicits a form whose fields all have defaults (SEP-1034)"),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return elicit(ctx, "Please review the defaults", sep1034Schema, "Elicitation completed: ")
		})
	s.AddTool(tool("test_elicitation_sep1330_enums", "Elicits a form with the five enum variants (SEP-1330)"),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return elicit(ctx, "Please pick some options", sep1330Schema, "Elicitation completed: ")
		})
	s.AddTool(mcp.NewToolWithRawSchema("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json.RawMessage(schema2020)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("JSON Schema 2020-12 tool called"), nil
		})
	// The server-sse-polling scenario wants this tool to end its POST stream
	// mid-call and deliver the answer after the client reconnects. mcp-go's
	// server has no way to end a request's stream early, so it answers on the
	// stream it was asked on; the scenario reports that as INFO and WARNING,
	// never as a failure.
	s.AddTool(tool("test_reconnection", "Answers after a short pause (SSE polling scenario)"),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := pause(ctx); err != nil {
				return nil, err
			}
			return mcp.NewToolResultText("Reconnection test completed successfully"), nil
		})
}

func result(content ...mcp.Content) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: content}
}

func pause(ctx context.Context) error {
	t := time.NewTimer(stepDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// elicit asks the client to fill in schema and answers with prefix followed
// by what it chose.
func elicit(ctx context.Context, message, schema, prefix string) (*mcp.CallToolResult, error) {
	res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, mcp.ElicitationRequest{
		Params: mcp.ElicitationParams{Message: message, RequestedSchema: json.RawMessage(schema)},
	})
	if err != nil {
		return mcp.NewToolResultError("elicitation failed: " + err.Error()), nil
	}
	content, err := json.Marshal(res.Content)
	if err != nil {
		return nil, fmt.Errorf("elicitation content: %w", err)
	}
	return mcp.NewToolResultText(fmt.Sprintf("%saction=%s, content=%s", prefix, res.Action, content)), nil
}

// samplingText is the text of a sampling answer, or its JSON when it is not
// one text item.
func samplingText(res *mcp.CreateMessageResult) string {
	switch c := res.Content.(type) {
	case mcp.TextContent:
		return c.Text
	case map[string]any:
		if text, ok := c["text"].(string); ok {
			return text
		}
	}
	raw, _ := json.Marshal(res.Content)
	return string(raw)
}

// silentWAV is a valid 8 kHz, 8-bit mono WAV file of 8 silent samples.
func silentWAV() string {
	const samples = 8
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + samples))
	b.WriteString("WAVEfmt ")
	le(uint32(16))   // fmt chunk size
	le(uint16(1))    // PCM
	le(uint16(1))    // mono
	le(uint32(8000)) // sample rate
	le(uint32(8000)) // byte rate
	le(uint16(1))    // block align
	le(uint16(8))    // bits per sample
	b.WriteString("data")
	le(uint32(samples))
	b.Write(bytes.Repeat([]byte{0x80}, samples))
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func addPrompts(s *server.MCPServer) {
	s.AddPrompt(mcp.NewPrompt("test_simple_prompt", mcp.WithPromptDescription("A prompt without arguments")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("A simple prompt", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("This is a simple prompt for testing.")),
			}), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_arguments",
		mcp.WithPromptDescription("A prompt with two required arguments"),
		mcp.WithArgument("arg1", mcp.ArgumentDescription("First test argument"), mcp.RequiredArgument()),
		mcp.WithArgument("arg2", mcp.ArgumentDescription("Second test argument"), mcp.RequiredArgument()),
	), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		a := req.Params.Arguments
		text := fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", a["arg1"], a["arg2"])
		return mcp.NewGetPromptResult("A prompt with arguments", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text)),
		}), nil
	})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_embedded_resource",
		mcp.WithPromptDescription("A prompt embedding the resource named by resourceUri"),
		mcp.WithArgument("resourceUri", mcp.ArgumentDescription("URI of the resource to embed"), mcp.RequiredArgument()),
	), func(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		uri := req.Params.Arguments["resourceUri"]
		if uri == "" {
			return nil, errors.New("resourceUri is required")
		}
		return mcp.NewGetPromptResult("A prompt with an embedded resource", []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing.",
			})),
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Please process the embedded resource above.")),
		}), nil
	})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_image", mcp.WithPromptDescription("A prompt with an image")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("A prompt with an image", []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewImageContent(redPixelPNG, "image/png")),
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent("Please analyze the image above.")),
			}), nil
		})
}

func addResources(s *server.MCPServer) {
	text := func(uri, body string) server.ResourceHandlerFunc {
		return func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: body}}, nil
		}
	}
	s.AddResource(mcp.NewResource("test://static-text", "static-text",
		mcp.WithResourceDescription("A static text resource"), mcp.WithMIMEType("text/plain")),
		text("test://static-text", "This is the content of the static text resource."))
	s.AddResource(mcp.NewResource("test://static-binary", "static-binary",
		mcp.WithResourceDescription("A static 1x1 PNG"), mcp.WithMIMEType("image/png")),
		func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.BlobResourceContents{
				URI: "test://static-binary", MIMEType: "image/png", Blob: redPixelPNG,
			}}, nil
		})
	s.AddResource(mcp.NewResource("test://watched-resource", "watched-resource",
		mcp.WithResourceDescription("A resource to subscribe to"), mcp.WithMIMEType("text/plain")),
		text("test://watched-resource", "This resource is watched for updates."))
	s.AddResourceTemplate(mcp.NewResourceTemplate("test://template/{id}/data", "template-data",
		mcp.WithTemplateDescription("Data for the id in the URI"), mcp.WithTemplateMIMEType("application/json")),
		func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			uri := req.Params.URI
			id := strings.TrimSuffix(strings.TrimPrefix(uri, "test://template/"), "/data")
			body, err := json.Marshal(map[string]any{"id": id, "templateTest": true, "data": "Data for ID: " + id})
			if err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(body)}}, nil
		})
}

// completions offers values for test_prompt_with_arguments' arg1 and the
// template's id that start with what the client typed.
type completions struct{}

func (completions) CompletePromptArgument(_ context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if prompt == "test_prompt_with_arguments" && arg.Name == "arg1" {
		return matching(arg.Value, "paris", "park", "party"), nil
	}
	return matching(arg.Value), nil
}

func (completions) CompleteResourceArgument(_ context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if uri == "test://template/{id}/data" && arg.Name == "id" {
		return matching(arg.Value, "123", "456", "789"), nil
	}
	return matching(arg.Value), nil
}

func matching(prefix string, values ...string) *mcp.Completion {
	out := []string{}
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return &mcp.Completion{Values: out, Total: len(out)}
}
