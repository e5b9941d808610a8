// Command echochild is the benchmark's MCP child: a server built with mcp-go
// that does next to nothing per call, so that what a benchmark measures is
// the transport and whatever sits between the client and it.
//
//	echo {text}        answers text
//	sleep_ms {ms}      answers after ms milliseconds
//	big {bytes}        answers one text content of that many bytes
//	tool_NNNNN         -tools N synthetic tools, each answering its name
//
// It serves stdio by default, or streamable HTTP on -http ADDR (path /mcp),
// printing "listening on ADDR" to stderr once it accepts connections.
package main

import (
	"context"
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

// maxBig bounds big's answer, so that a bad argument cannot exhaust memory.
const maxBig = 64 << 20

func main() {
	tools := flag.Int("tools", 0, "synthetic tools to offer besides echo, sleep_ms and big")
	page := flag.Int("page", 0, "tools/list page size (0: one page)")
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	if err := run(*tools, *page, *addr); err != nil {
		fmt.Fprintf(os.Stderr, "echochild: %v\n", err)
		os.Exit(1)
	}
}

func run(tools, page int, addr string) error {
	opts := []server.ServerOption{server.WithToolCapabilities(true)}
	if page > 0 {
		opts = append(opts, server.WithPaginationLimit(page))
	}
	s := server.NewMCPServer("echochild", "1", opts...)
	s.AddTools(baseTools()...)
	s.AddTools(synthetic(tools)...)
	if addr == "" {
		return server.ServeStdio(s)
	}
	return serveHTTP(s, addr)
}

// serveHTTP serves s on addr until SIGTERM or SIGINT.
func serveHTTP(s *server.MCPServer, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "listening on %s\n", ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func baseTools() []server.ServerTool {
	return []server.ServerTool{
		{Tool: mcp.NewTool("echo", mcp.WithDescription("Answers its text."),
			mcp.WithString("text", mcp.Description("What to answer."))),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(req.GetString("text", "")), nil
			}},
		{Tool: mcp.NewTool("sleep_ms", mcp.WithDescription("Answers after ms milliseconds."),
			mcp.WithNumber("ms", mcp.Required(), mcp.Description("How long to sleep."))),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				t := time.NewTimer(time.Duration(req.GetFloat("ms", 0) * float64(time.Millisecond)))
				defer t.Stop()
				select {
				case <-t.C:
					return mcp.NewToolResultText("slept"), nil
				case <-ctx.Done():
					return mcp.NewToolResultError("cancelled"), nil
				}
			}},
		{Tool: mcp.NewTool("big", mcp.WithDescription("Answers one text content of the given size."),
			mcp.WithNumber("bytes", mcp.Required(), mcp.Description("Size of the answer in bytes."))),
			Handler: func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				n := int(req.GetFloat("bytes", 0))
				if n < 0 || n > maxBig {
					return mcp.NewToolResultError(fmt.Sprintf("bytes must be 0..%d", maxBig)), nil
				}
				return mcp.NewToolResultText(strings.Repeat("x", n)), nil
			}},
	}
}

// synthetic returns n tools shaped like a typical real one: a description
// and a few typed, described parameters.
func synthetic(n int) []server.ServerTool {
	out := make([]server.ServerTool, n)
	for i := range out {
		name := fmt.Sprintf("tool_%05d", i)
		out[i] = server.ServerTool{
			Tool: mcp.NewTool(name,
				mcp.WithDescription("Synthetic benchmark tool "+name+": looks up records by query and returns a page of them."),
				mcp.WithString("query", mcp.Required(), mcp.Description("What to look for.")),
				mcp.WithNumber("limit", mcp.Description("Most records to return.")),
				mcp.WithBoolean("exact", mcp.Description("Match the query exactly.")),
			),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(name), nil
			},
		}
	}
	return out
}
