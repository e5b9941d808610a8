package mux

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// The HTTP upstream's benchmarks: a real mcp-go client over streamable HTTP
// on loopback, to the HTTP upstream on httptest with the benchmark's echo
// child (bench/echochild) as a real stdio process behind it, beside "direct",
// the same client on the echo child serving streamable HTTP itself. As in
// callpath_bench_test.go, the client's work and mcpmux's are both in this
// process: compare mux with direct.

// benchHTTPMux starts a Mux whose child "echo" is the echo child with tools
// synthetic tools, and children-1 more echo children of 3 tools each, and
// returns a client on its HTTP upstream.
func benchHTTPMux(b *testing.B, tools, children int) *benchHTTPClient {
	b.Helper()
	bin := testsupport.EchoChildBinary(b)
	m := runMux(b, map[string]string{"bench": `allow = ["*"]`}, nil, func(policies string) string {
		var s strings.Builder
		fmt.Fprintf(&s, "[mux]\npolicy_dir = %q\n\n[servers.echo]\ncommand = %q\nargs = [\"-tools\", \"%d\"]\n", policies, bin, tools)
		for i := 1; i < children; i++ {
			fmt.Fprintf(&s, "\n[servers.c%02d]\ncommand = %q\n", i, bin)
		}
		return s.String()
	})
	_, url := serveLab(b, m, edge.HTTPOptions{Path: "/mcp"}, func(*http.Request) string { return "bench" })
	return newBenchHTTPClient(b, url)
}

// benchHTTPDirect starts the echo child serving streamable HTTP with tools
// synthetic tools and returns a client on it.
func benchHTTPDirect(b *testing.B, tools int) *benchHTTPClient {
	b.Helper()
	cmd := exec.Command(testsupport.EchoChildBinary(b), "-tools", fmt.Sprint(tools), "-http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
			go func() { // keep draining, so that the child never blocks on stderr
				for lines.Scan() {
				}
			}()
			return newBenchHTTPClient(b, "http://"+addr+"/mcp")
		}
	}
	b.Fatal("echochild exited before it listened")
	return nil
}

type benchHTTPClient struct {
	*testing.B
	url string
	c   interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
		ListTools(context.Context, mcp.ListToolsRequest) (*mcp.ListToolsResult, error)
	}
}

func newBenchHTTPClient(b *testing.B, url string) *benchHTTPClient {
	b.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		b.Fatal(err)
	}
	return &benchHTTPClient{B: b, url: url, c: benchClient(b, tr)}
}

// newBenchHTTPClientAt is a client on url that settles on protocol.
func newBenchHTTPClientAt(b *testing.B, url, protocol string) *benchHTTPClient {
	b.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = protocol
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		b.Fatal(err)
	}
	if res.ProtocolVersion != protocol {
		b.Fatalf("asked for %s, settled on %s", protocol, res.ProtocolVersion)
	}
	return &benchHTTPClient{B: b, url: url, c: c}
}

// benchHTTPTargets are the two ways to reach the echo child over HTTP, with
// the prefix of its tools there.
var benchHTTPTargets = []struct {
	name   string
	prefix string
	start  func(*testing.B, int) *benchHTTPClient
}{
	{"direct", "", benchHTTPDirect},
	{"mux", "echo__", func(b *testing.B, tools int) *benchHTTPClient { return benchHTTPMux(b, tools, 1) }},
}

func (c *benchHTTPClient) call(name string, args map[string]any) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.c.CallTool(context.Background(), req)
	if err != nil {
		c.Fatal(err)
	}
	if res.IsError {
		c.Fatalf("%s: %v", name, res.Content)
	}
}

// BenchmarkHTTPCall is one serial echo call over streamable HTTP.
func BenchmarkHTTPCall(b *testing.B) {
	for _, t := range benchHTTPTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 100)
			args := map[string]any{"text": "hello"}
			b.ReportAllocs()
			for b.Loop() {
				c.call(t.prefix+"echo", args)
			}
		})
	}
}

// BenchmarkHTTPCallModern is one serial echo call over streamable HTTP
// from a 2026-07-28 client, whose every request carries its _meta.
func BenchmarkHTTPCallModern(b *testing.B) {
	for _, t := range benchHTTPTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 100)
			modern := newBenchHTTPClientAt(b, c.url, mcp.ProtocolVersion20260728)
			args := map[string]any{"text": "hello"}
			b.ReportAllocs()
			for b.Loop() {
				modern.call(t.prefix+"echo", args)
			}
		})
	}
}

// BenchmarkHTTPCallBig is one serial call answering 256 KiB over
// streamable HTTP.
func BenchmarkHTTPCallBig(b *testing.B) {
	for _, t := range benchHTTPTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 100)
			args := map[string]any{"bytes": 256 << 10}
			b.ReportAllocs()
			b.SetBytes(256 << 10)
			for b.Loop() {
				c.call(t.prefix+"big", args)
			}
		})
	}
}

// BenchmarkHTTPCallParallel is echo calls from 8 callers on one session.
func BenchmarkHTTPCallParallel(b *testing.B) {
	for _, t := range benchHTTPTargets {
		b.Run(t.name, func(b *testing.B) {
			c := t.start(b, 100)
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				args := map[string]any{"text": "hello"}
				for pb.Next() {
					c.call(t.prefix+"echo", args)
				}
			})
		})
	}
}

// BenchmarkHTTPToolsList is one tools/list of 2,005 tools (and 3 more per
// extra child behind the mux).
func BenchmarkHTTPToolsList(b *testing.B) {
	run := func(b *testing.B, c *benchHTTPClient, want int) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.c.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Tools) != want {
				b.Fatalf("%d tools, want %d", len(res.Tools), want)
			}
		}
	}
	b.Run("direct", func(b *testing.B) { run(b, benchHTTPDirect(b, 2002), 2005) })
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("mux/children=%d", n), func(b *testing.B) {
			run(b, benchHTTPMux(b, 2002, n), 2005+3*(n-1))
		})
	}
}
