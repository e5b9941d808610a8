package main

// With LAB_TASKS=1 the server also declares tasks for tools/call (with
// tasks/list and tasks/cancel) and offers two tools, so that a test drives
// a task through its states at moments it chooses:
//
//	task_wait {tag}  (taskSupport required) runs until release {tag} is
//	                 called or a file release-TAG appears in LAB_STARTED_DIR
//	                 (looked for every 10 ms: a test can then release it
//	                 while it has no request in flight), then answers the
//	                 text "released TAG" with structuredContent {"tag": TAG};
//	                 a tasks/cancel of any task ends every task_wait still
//	                 waiting (mcp-go tells a handler neither its task id
//	                 nor of the cancel)
//	release {tag}    releases task_wait TAG, whether it started yet or not

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// tasksOptions are the server options LAB_TASKS adds, for the gates g.
func tasksOptions(g *gates) []server.ServerOption {
	hooks := &server.TaskHooks{}
	hooks.AddOnTaskCancelled(func(context.Context, server.TaskMetrics) { g.cancelAll() })
	return []server.ServerOption{server.WithTaskCapabilities(true, true, true), server.WithTaskHooks(hooks)}
}

// gates hold one channel per tag, made by whichever of task_wait and
// release comes first, closed by release; and cancelled, closed and
// replaced at each tasks/cancel.
type gates struct {
	mu        sync.Mutex
	by        map[string]chan struct{}
	cancelled chan struct{}
}

func newGates() *gates {
	return &gates{by: map[string]chan struct{}{}, cancelled: make(chan struct{})}
}

func (g *gates) cancelAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.cancelled)
	g.cancelled = make(chan struct{})
}

// wait returns tag's gate and the current cancellation.
func (g *gates) wait(tag string) (chan struct{}, chan struct{}) {
	c := g.of(tag)
	g.mu.Lock()
	defer g.mu.Unlock()
	return c, g.cancelled
}

func (g *gates) of(tag string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.by[tag]
	if !ok {
		c = make(chan struct{})
		g.by[tag] = c
	}
	return c
}

// registerTasks adds task_wait and release, on the gates tasksOptions
// was given.
func registerTasks(s *server.MCPServer, g *gates) {
	s.AddTool(mcp.NewTool("task_wait",
		mcp.WithDescription("Run as a task until release is called with the same tag."),
		mcp.WithString("tag", mcp.Required()),
		mcp.WithTaskSupport(mcp.TaskSupportRequired),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// Not the context: mcp-go ends it as soon as the task is created.
		tag := req.GetString("tag", "")
		released, cancelled := g.wait(tag)
		var file string
		if dir := os.Getenv("LAB_STARTED_DIR"); dir != "" {
			file = filepath.Join(dir, "release-"+filepath.Base(tag))
		}
		look := time.NewTicker(10 * time.Millisecond)
		defer look.Stop()
		for {
			select {
			case <-released:
				return mcp.NewToolResultStructured(map[string]any{"tag": tag}, "released "+tag), nil
			case <-cancelled:
				return nil, context.Canceled
			case <-look.C:
				if _, err := os.Stat(file); file != "" && err == nil {
					return mcp.NewToolResultStructured(map[string]any{"tag": tag}, "released "+tag), nil
				}
			}
		}
	})
	s.AddTool(mcp.NewTool("release",
		mcp.WithDescription("Let task_wait with this tag answer."),
		mcp.WithString("tag", mcp.Required()),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tag := req.GetString("tag", "")
		c := g.of(tag)
		g.mu.Lock()
		select {
		case <-c:
		default:
			close(c)
		}
		g.mu.Unlock()
		return mcp.NewToolResultText("released " + tag), nil
	})
}
