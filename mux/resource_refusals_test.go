package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/naming"
)

// refusalLab is a Mux on two real children: docs, with resources (one of
// them under a URI with characters an RFC 6570 {+uri} expansion never
// holds), and tools, with no resources at all. reader may read both
// children's resources. It returns the Mux's HTTP endpoint.
func refusalLab(t *testing.T) string {
	t.Helper()
	docs := server.NewMCPServer("docs", "1", server.WithResourceCapabilities(true, false))
	for _, uri := range []string{"file:///données/a b.txt", "docs://readme"} {
		docs.AddResource(mcp.NewResource(uri, uri), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, Text: "text of " + uri}}, nil
		})
	}
	tools := server.NewMCPServer("tools", "1", server.WithToolCapabilities(true))
	tools.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("x"), nil
	})
	docsURL, toolsURL := serveChild(t, docs).URL+"/mcp", serveChild(t, tools).URL+"/mcp"
	m := runMux(t, map[string]string{"reader": "allow = [\"*\"]\nallow_resources = [\"docs\", \"tools\"]"}, nil, func(dir string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.docs]\nurl = %q\n\n[servers.tools]\nurl = %q\n", dir, docsURL, toolsURL)
	})
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp", SessionIdleTimeout: time.Hour},
		func(r *http.Request) string { return r.Header.Get("X-Identity") })
	return url
}

// A read or a subscribe of a URI no child owns gets the one answer every
// unknown URI gets, -32002 "Resource not found" with data.uri (-32602 for
// a 2026-07-28 client), whatever the URI holds and whichever alias it
// names: one mcp-go's catch-all template does not match (a backslash, a
// space, a non-ASCII letter), one under a server with no resources, one
// with dot segments under it. A listed URI with such characters is read.
func TestUnknownURIsRefusedAlike(t *testing.T) {
	url := refusalLab(t)
	headers := map[string]string{"X-Identity": "reader"}
	legacy := testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Headers: headers, Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION})
	modern := testsupport.ConnectHTTP(t, url, testsupport.HTTPClient{Headers: headers})
	if v := modern.ProtocolVersion(); !mcp.IsModernProtocol(v) {
		t.Fatalf("the modern client speaks %s", v)
	}

	unknown := []string{
		"mcpmux://nosuch/x", // the reference: no such server
		`mcpmux://docs\evil/x`,
		"mcpmux://docs evil/x",
		"mcpmux://tools/x",
		"mcpmux://tools/../evil/x",
		"mcpmux://tools/file:///données",
		"mcpmux://döcs/x",
		"not a uri",
	}
	rpc := func(c *testsupport.Conn, method, uri string) (json.RawMessage, *testsupport.RPCError) {
		if mcp.IsModernProtocol(c.ProtocolVersion()) {
			return testsupport.ModernTry(t, c.Client, method, map[string]any{"uri": uri, "_meta": testsupport.ModernMeta(map[string]any{})})
		}
		return testsupport.RPC(t, c.Client, method, map[string]any{"uri": uri})
	}
	check := func(t *testing.T, c *testsupport.Conn, method string, code int, uri string) {
		t.Helper()
		_, got := rpc(c, method, uri)
		want := fmt.Sprintf(`{"uri":%q}`, uri)
		if got == nil || got.Code != code || got.Message != "Resource not found" || string(got.Data) != want {
			t.Errorf("%s %s %q: %v, want %d Resource not found with data %s", c.ProtocolVersion(), method, uri, got, code, want)
		}
	}
	for _, uri := range unknown {
		check(t, legacy, string(mcp.MethodResourcesRead), mcp.RESOURCE_NOT_FOUND, uri)
		check(t, legacy, string(mcp.MethodResourcesSubscribe), mcp.RESOURCE_NOT_FOUND, uri)
		check(t, modern, string(mcp.MethodResourcesRead), mcp.INVALID_PARAMS, uri)
	}

	for _, c := range []*testsupport.Conn{legacy, modern} {
		uri := naming.ExposeURI("docs", "file:///données/a b.txt")
		res, rerr := rpc(c, string(mcp.MethodResourcesRead), uri)
		if rerr != nil || !strings.Contains(string(res), `"text":"text of file:///données/a b.txt"`) || !strings.Contains(string(res), `"uri":"`+uri+`"`) {
			t.Errorf("%s read %q: %s %v", c.ProtocolVersion(), uri, res, rerr)
		}
	}
}
