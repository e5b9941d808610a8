package mux

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/catalog"
)

// The children's first starts build the merged catalog once, when the
// last of them is over (nothing upstream reads it before): one "catalog
// changed" with every ready child's tools, a child that failed its first
// start left out. A child's later catalog is merged as it is published.
func TestFirstStartsBuildOneCatalog(t *testing.T) {
	var urls []string
	var children []*server.MCPServer
	for i := range 3 {
		child := server.NewMCPServer(fmt.Sprintf("c%d", i), "1", server.WithToolCapabilities(true))
		child.AddTool(mcp.NewTool("t"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
		urls = append(urls, serveChild(t, child).URL+"/mcp")
		children = append(children, child)
	}
	log := &testsupport.SyncBuffer{}
	m := runMux(t, map[string]string{"bench": `allow = ["*"]`}, log, func(policies string) string {
		src := fmt.Sprintf("[mux]\npolicy_dir = %q\n", policies)
		for i, u := range urls {
			src += fmt.Sprintf("\n[servers.c%d]\nurl = %q\n", i, u)
		}
		// Nothing listens there: its first start fails.
		return src + "\n[servers.gone]\nurl = \"http://127.0.0.1:1/mcp\"\nstartup_timeout = \"2s\"\n"
	})
	var names []string
	for _, e := range m.catalog.Load().Kinds[catalog.KindTool].List {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, " "); got != "c0__t c1__t c2__t" {
		t.Errorf("catalog once the first starts are over: %q, want c0__t c1__t c2__t", got)
	}
	if n := strings.Count(log.String(), `"message":"catalog changed"`); n != 1 {
		t.Errorf("%d catalog changes logged by the first starts, want 1\n%s", n, log.String())
	}

	children[1].AddTool(mcp.NewTool("u"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	testsupport.WaitFor(t, "c1's new tool in the catalog", func() bool {
		_, ok := m.catalog.Load().Lookup(catalog.KindTool, "c1__u")
		return ok
	})
}
