package mux

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// A client that stops reading holds up only what is written to it: the
// children's catalogs go on being read and published while list_changed
// for it cannot be written, because telling sessions is the announcer's
// work, not the child supervisor's. The session is told once it reads
// again.
func TestPublishingDoesNotWaitForAClient(t *testing.T) {
	child := server.NewMCPServer("lab", "1", server.WithToolCapabilities(true))
	add := func(name string) {
		child.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name), nil
		})
	}
	add("a")
	childHTTP := server.NewStreamableHTTPServer(child, server.WithStateful(true))
	hs := httptest.NewServer(childHTTP)
	t.Cleanup(func() {
		_ = childHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	m := runMux(t, map[string]string{"eq": `allow = ["lab__*"]`}, nil, func(dir string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n", dir, hs.URL+"/mcp")
	})

	// A stdio client on a pipe with no buffer: once it stops reading, any
	// write to it blocks.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- m.ServeStdio(context.Background(), "eq", inR, outW)
		_ = outW.Close()
	}()
	out := bufio.NewReader(outR)
	// Run before m.Close, even when the test fails while the client reads
	// nothing: every write to it is let through again.
	t.Cleanup(func() {
		drained := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, out)
			close(drained)
		}()
		_ = inW.Close()
		if err := <-served; err != nil {
			t.Error(err)
		}
		<-drained
	})
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // the two answers
		if _, err := out.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}

	// The client reads nothing more. Two changes of the child's tools in
	// turn: the second is published while list_changed for the first
	// cannot be written.
	ctx := WithCaller(context.Background(), "eq", nil)
	has := func(name string) bool {
		return slices.ContainsFunc(m.Tools(ctx), func(ti ToolInfo) bool { return ti.Name == name })
	}
	add("b")
	testsupport.WaitFor(t, "lab__b in the catalog", func() bool { return has("lab__b") })
	add("c")
	testsupport.WaitFor(t, "lab__c in the catalog while the client reads nothing", func() bool { return has("lab__c") })

	// Reading again, the client is told its tools changed.
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if want := `"method":"notifications/tools/list_changed"`; !strings.Contains(line, want) {
		t.Errorf("first line once the client reads again: %s, want %s", line, want)
	}
}
