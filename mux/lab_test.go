package mux

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/replicas"
	"github.com/mcpmux/mcpmux/mux/telemetry"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// The in-process lab the mux tests and fuzz targets share: a started Mux
// whose one child, "lab", is a real MCP server (mcp-go's) served in process
// over streamable HTTP, so that a call costs a round trip on loopback rather
// than a process start.

// labSpec is what a lab is made of.
type labSpec struct {
	tools []server.ServerTool
	// childOpts are more options of the child's server; onChild is given
	// the child's HTTP server once it runs.
	childOpts []server.ServerOption
	onChild   func(*httptest.Server)
	// allow are the identities whose policy allows every tool.
	allow []string
	// muxLines, limitLines and serverLines are raw TOML for the [mux],
	// [limits] and [servers.lab] tables.
	muxLines, limitLines, serverLines string
	// log receives the Mux's log; nil discards it.
	log io.Writer
	// checkLeaks fails the test if a goroutine outlives the lab.
	checkLeaks bool
	// tracing traces the Mux's requests; nil: off.
	tracing *telemetry.Tracing
	// replica seals the ids handed out as cmd/mcpmux has that replica seal
	// them; nil: none sealed.
	replica *replicas.Node
}

// startLab starts the child with s's tools and a Mux on it, waits until the
// Mux is ready, and stops both when tb ends.
func startLab(tb testing.TB, s labSpec) *Mux {
	tb.Helper()
	if s.checkLeaks {
		_, before := testsupport.Goroutines()
		// Registered first, so run after the lab is stopped.
		tb.Cleanup(func() { testsupport.CheckGoroutines(tb, before) })
	}
	child := server.NewMCPServer("lab", "1", append([]server.ServerOption{server.WithToolCapabilities(true)}, s.childOpts...)...)
	child.AddTools(s.tools...)
	hs := serveChild(tb, child)
	if s.onChild != nil {
		s.onChild(hs)
	}

	bodies := map[string]string{}
	for _, id := range s.allow {
		bodies[id] = `allow = ["*"]`
	}
	opts := Options{Tracing: s.tracing}
	if s.replica != nil {
		opts.SealSessionID, opts.SealRequestState, opts.TaskIDs = s.replica.SealSessionID, s.replica.SealRequestState, s.replica.TaskIDs()
	}
	return runMuxWith(tb, bodies, s.log, opts, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n%s\n\n[limits]\n%s\n\n[servers.lab]\nurl = %q\n%s\n",
			policies, s.muxLines, s.limitLines, hs.URL+"/mcp", s.serverLines)
	})
}

// serveChild serves child, a real mcp-go server, over stateful streamable
// HTTP on loopback until tb ends; its MCP endpoint is the URL + "/mcp".
func serveChild(tb testing.TB, child *server.MCPServer) *httptest.Server {
	tb.Helper()
	childHTTP := server.NewStreamableHTTPServer(child, server.WithStateful(true))
	hs := httptest.NewServer(childHTTP)
	tb.Cleanup(func() {
		_ = childHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs
}

// runMux writes each identity's policy (identity -> body) into a policy
// directory, starts a Mux on the config src returns for that directory,
// logging to log (nil discards), and waits until it is ready. The Mux
// closes when tb ends, before whatever was registered earlier.
func runMux(tb testing.TB, policies map[string]string, log io.Writer, src func(policyDir string) string) *Mux {
	tb.Helper()
	return runMuxWith(tb, policies, log, Options{}, src)
}

// runMuxWith is runMux with opts (its Log set from log).
func runMuxWith(tb testing.TB, policies map[string]string, log io.Writer, opts Options, src func(policyDir string) string) *Mux {
	tb.Helper()
	root := tb.TempDir()
	dir := filepath.Join(root, "policies")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for id, body := range policies {
		if err := os.WriteFile(filepath.Join(dir, id+".toml"), []byte(body+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	cfg, err := config.Parse(filepath.Join(root, "mcpmux.toml"), []byte(src(dir)), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	store, err := policy.NewStore(cfg.Mux.PolicyDir, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	l := zerolog.Nop()
	if log != nil {
		l = zerolog.New(log)
	}
	opts.Log = l
	m := New(cfg, store, opts)
	m.Start(context.Background())
	tb.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	if err := m.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	return m
}

// serveLab serves m's HTTP upstream with o on httptest, each request as the
// identity that identity returns for it, until tb ends; it returns the
// upstream and its MCP endpoint's URL.
func serveLab(tb testing.TB, m *Mux, o edge.HTTPOptions, identity func(*http.Request) string) (*edge.HTTPUpstream, string) {
	tb.Helper()
	up := m.NewHTTPUpstream(o)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.ServeHTTP(w, r.WithContext(upstream.WithIdentity(r.Context(), identity(r))))
	}))
	// Registered after the lab's clean-up, so run before it.
	tb.Cleanup(func() {
		up.Shutdown(context.Background())
		hs.Close()
	})
	return up, hs.URL + o.Path
}
