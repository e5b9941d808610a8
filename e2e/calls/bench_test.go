package calls

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The cost of mcpmux is what a call through it costs beyond the same call
// made to the child directly: two more pipe hops, the registry look-up, the
// policy check and the argument validation.
//
//	go test ./e2e -run '^$' -bench Call -benchtime 3s

func echoRequest() mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = "echo"
	req.Params.Arguments = map[string]any{"message": "hello"}
	return req
}

func BenchmarkCallDirect(b *testing.B) {
	_, labserver := ts.Binaries(b)
	c, err := client.NewStdioMCPClient(labserver, []string{"LAB_SOURCE=docs"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	req := echoRequest()
	for b.Loop() {
		if _, err := c.CallTool(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCallThroughMux(b *testing.B) {
	m := benchMux(b)
	req := echoRequest()
	req.Params.Name = "docs__echo"
	ctx := context.Background()
	for b.Loop() {
		if _, err := m.Client.CallTool(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// Many callers at once, as agents do: the throughput mcpmux sustains.
func BenchmarkCallThroughMuxParallel(b *testing.B) {
	m := benchMux(b)
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		req := echoRequest()
		req.Params.Name = "docs__echo"
		ctx := context.Background()
		for pb.Next() {
			if _, err := m.Client.CallTool(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchMux(b *testing.B) *ts.Mux {
	lab := ts.NewLab(b, `log_level = "warn"`, ts.Server{Alias: "docs"})
	lab.WritePolicy(b, "reader", `allow = ["*"]`)
	m := ts.StartMux(b, lab)
	if names := m.ToolNames(); !ts.Contains(names, "docs__echo") {
		b.Fatalf("tools = %v", names)
	}
	return m
}
