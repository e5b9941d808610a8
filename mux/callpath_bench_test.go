package mux

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// The call path's benchmarks: a real mcp-go client on Mux.ServeStdio, over
// pipes, and the benchmark's echo child (bench/echochild) as a real process
// behind it; "direct" is the same client on the child itself. What they
// report per operation (time, B/op, allocs/op) is the client's and mcpmux's
// together, since both run in this process: compare mux with direct.

// benchClient is a client on a transport, closed when b ends.
func benchClient(b *testing.B, tr transport.Interface) *client.Client {
	b.Helper()
	c := client.NewClient(tr)
	// A stdio transport's process lives as long as Start's context.
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// benchMux starts a Mux whose one child, "echo", is the echo child with
// tools synthetic tools, and returns a client on its stdio upstream.
func benchMux(b *testing.B, tools int) *client.Client {
	b.Helper()
	return benchMuxWith(b, tools, Options{})
}

// benchMuxWith is benchMux with opts.
func benchMuxWith(b *testing.B, tools int, opts Options) *client.Client {
	b.Helper()
	bin := testsupport.EchoChildBinary(b)
	m := runMuxWith(b, map[string]string{"bench": `allow = ["*"]`}, nil, opts, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.echo]\ncommand = %q\nargs = [\"-tools\", \"%d\"]\n",
			policies, bin, tools)
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- m.ServeStdio(context.Background(), "bench", inR, outW)
		_ = outW.Close()
	}()
	c := benchClient(b, transport.NewIO(outR, inW, nil))
	b.Cleanup(func() {
		_ = inW.Close()
		<-served
	})
	return c
}

// benchDirect starts the echo child with tools synthetic tools and returns a
// client on it.
func benchDirect(b *testing.B, tools int) *client.Client {
	b.Helper()
	tr := transport.NewStdio(testsupport.EchoChildBinary(b), nil, "-tools", fmt.Sprint(tools))
	return benchClient(b, tr)
}

// benchTarget is one way to reach the echo child, with the name its echo
// tool has there.
type benchTarget struct {
	name   string
	prefix string
	start  func(*testing.B, int) *client.Client
}

var benchTargets = []benchTarget{
	{"direct", "", benchDirect},
	{"mux", "echo__", benchMux},
}

func benchCall(b *testing.B, c *client.Client, name string, args map[string]any) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	if res.IsError {
		b.Fatalf("%s: %v", name, res.Content)
	}
}

// BenchmarkCall is one serial echo call, with 100 and 10,000 tools in the
// catalog: what mcpmux adds per call must not depend on the catalog.
func BenchmarkCall(b *testing.B) {
	for _, t := range benchTargets {
		for _, n := range []int{100, 10000} {
			b.Run(fmt.Sprintf("%s/tools=%d", t.name, n), func(b *testing.B) {
				c := t.start(b, n)
				args := map[string]any{"text": "hello"}
				b.ReportAllocs()
				for b.Loop() {
					benchCall(b, c, t.prefix+"echo", args)
				}
			})
		}
	}
}

// BenchmarkCallParallel is echo calls from 8 callers on one session.
func BenchmarkCallParallel(b *testing.B) {
	for _, t := range benchTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 100)
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				args := map[string]any{"text": "hello"}
				for pb.Next() {
					benchCall(b, c, t.prefix+"echo", args)
				}
			})
		})
	}
}

// BenchmarkBig is one call whose result holds 256 KiB of text.
func BenchmarkBig(b *testing.B) {
	for _, t := range benchTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 0)
			args := map[string]any{"bytes": 256 << 10}
			b.SetBytes(256 << 10)
			b.ReportAllocs()
			for b.Loop() {
				benchCall(b, c, t.prefix+"big", args)
			}
		})
	}
}

// BenchmarkToolsList is one tools/list of 2,005 tools.
func BenchmarkToolsList(b *testing.B) {
	for _, t := range benchTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 2002)
			b.ReportAllocs()
			for b.Loop() {
				res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Tools) != 2005 || !strings.HasPrefix(res.Tools[0].Name, t.prefix) {
					b.Fatalf("%d tools, first %q", len(res.Tools), res.Tools[0].Name)
				}
			}
		})
	}
}
