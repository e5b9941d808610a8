package mux

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// afterReturn wraps a ResponseWriter and counts every use of it after the
// handler it was given to returned.
type afterReturn struct {
	http.ResponseWriter
	done *atomic.Bool
	late *atomic.Int64
}

func (a afterReturn) use() {
	if a.done.Load() {
		a.late.Add(1)
	}
}
func (a afterReturn) Write(b []byte) (int, error) { a.use(); return a.ResponseWriter.Write(b) }
func (a afterReturn) WriteHeader(c int)           { a.use(); a.ResponseWriter.WriteHeader(c) }
func (a afterReturn) Flush()                      { a.use(); http.NewResponseController(a.ResponseWriter).Flush() }
func (a afterReturn) Unwrap() http.ResponseWriter { a.use(); return a.ResponseWriter }

// A task's run outlives the POST that created it, but its context carries
// that POST's direct writer (recorder.writeEvent): the child's progress
// during the task is either written to a ResponseWriter whose handler has
// returned (when the creating response had become an event stream) or
// silently dropped (when it was a JSON body). Either way it never reaches
// the client, which asked for it with a progressToken.
func TestTaskProgressReachesItsSession(t *testing.T) {
	release := make(chan struct{})
	sent := make(chan struct{})
	// The child's own mcp-go server drops a notification that the
	// forwarder of a POST of mcpmux's takes as that POST ends, or after:
	// so the task sends its progress once mcpmux waits on tasks/result,
	// and ends only once the progress is through.
	resultAsked, delivered := make(chan struct{}), make(chan struct{})
	var once, asked sync.Once
	hooks := &server.Hooks{}
	hooks.AddBeforeAny(func(_ context.Context, _ any, method mcp.MCPMethod, _ any) {
		if method == mcp.MethodTasksResult {
			asked.Do(func() { close(resultAsked) })
		}
	})
	tool := func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-release
		select { // not ctx: mcp-go may end it with the creating request
		case <-resultAsked:
		case <-time.After(testsupport.Wait):
		}
		if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress),
				map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "total": 2})
			once.Do(func() { close(sent) })
			select {
			case <-delivered:
			case <-time.After(testsupport.Wait):
			}
		}
		return mcp.NewToolResultText("done"), nil
	}
	m := startLab(t, labSpec{
		allow:     []string{"reader"},
		childOpts: []server.ServerOption{server.WithTaskCapabilities(true, true, true), server.WithHooks(hooks)},
		tools: []server.ServerTool{{Tool: mcp.NewTool("slow", mcp.WithTaskSupport(mcp.TaskSupportRequired)),
			Handler: tool}},
	})
	up := m.NewHTTPUpstream(edge.HTTPOptions{Path: "/mcp"})
	var late atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var done atomic.Bool
		defer done.Store(true)
		up.ServeHTTP(afterReturn{w, &done, &late}, r.WithContext(upstream.WithIdentity(r.Context(), "reader")))
	}))
	t.Cleanup(func() { up.Shutdown(context.Background()); hs.Close() })

	c := connectTasks(t, hs.URL+"/mcp")
	// Before any GET stream, mcpmux's notification goes through mcp-go's
	// channel, where the lingering forwarder of an answered POST can take
	// and drop it (ownnotes.go).
	awaitGETStream(t, m, c)
	raw := testsupport.MustRPC(t, c.Client, "tools/call", map[string]any{
		"name": "lab__slow", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000},
		"_meta": map[string]any{"progressToken": "p1"}})
	t.Logf("created: %s", raw)
	close(release)
	<-sent
	arrived := c.Await(string(mcp.MethodNotificationProgress), testsupport.Wait)
	close(delivered)
	if !arrived {
		t.Errorf("the task's progress never reached the client (late uses of a finished ResponseWriter: %d)", late.Load())
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d uses of a ResponseWriter after its handler returned", n)
	}
}
