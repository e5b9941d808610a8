// Package trafficchild is a test child server for the traffic mcpmux relays
// during a call: progress, log messages, and requests to the client
// (sampling, elicitation, roots). The same server runs over stdio (the
// trafficchild command) and, in process, over streamable HTTP.
package trafficchild

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Child is one traffic child server.
type Child struct {
	Server *server.MCPServer

	later sync.WaitGroup // work a tool left running after its answer
	mu    sync.Mutex
	got   string // what the last request made after an answer got back
	flush *Flusher
}

// New returns a child. flush, when not nil, is the writer of a stdio
// child's stdout: progress waits until it has been written, so that the
// child itself never lets its answer overtake its progress (mcp-go's stdio
// server writes notifications from another goroutine than answers).
func New(flush *Flusher) *Child {
	c := &Child{flush: flush}
	s := server.NewMCPServer("traffic", "1", server.WithToolCapabilities(true), server.WithLogging())
	c.Server = s
	s.AddTool(mcp.NewTool("progress", mcp.WithNumber("count"), mcp.WithString("tag"), mcp.WithBoolean("late")), c.progress)
	s.AddTool(mcp.NewTool("ask", mcp.WithString("what"), mcp.WithBoolean("later")), c.ask)
	s.AddTool(mcp.NewTool("asked", mcp.WithString("what")), c.asked)
	s.AddTool(mcp.NewTool("log", mcp.WithString("level"), mcp.WithString("logger"), mcp.WithString("text"),
		mcp.WithBoolean("later")), c.log)
	s.AddTool(mcp.NewTool("level"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if l, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); ok {
			return mcp.NewToolResultText(string(l.GetLogLevel())), nil
		}
		return mcp.NewToolResultText(""), nil
	})
	return c
}

func (c *Child) progress(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c.later.Wait() // progress of an earlier call's, sent after its answer, goes first
	n, tag := req.GetInt("count", 0), req.GetString("tag", "")
	send := func(i int) {
		var token mcp.ProgressToken
		if req.Params.Meta != nil {
			token = req.Params.Meta.ProgressToken
		}
		if token == nil {
			return
		}
		_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": token, "progress": i, "total": n, "message": fmt.Sprintf("%s %d", tag, i)})
	}
	if req.GetBool("late", false) {
		after := c.flush.afterAnswer(ctx)
		c.later.Go(func() {
			after()
			c.flush.wait(func() { send(0) }, 1)
		})
		return mcp.NewToolResultText("late " + tag), nil
	}
	c.flush.wait(func() {
		for i := 1; i <= n; i++ {
			send(i)
		}
	}, n)
	return mcp.NewToolResultText("done " + tag), nil
}

// ask makes one request of the client and answers with what it got; with
// later, it answers first and makes the request afterwards (asked returns
// what it got).
func (c *Child) ask(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	what := req.GetString("what", "")
	if req.GetBool("later", false) {
		srv, cs := server.ServerFromContext(ctx), server.ClientSessionFromContext(ctx)
		after := c.flush.afterAnswer(ctx)
		c.later.Go(func() {
			after()
			got := request(srv.WithContext(context.Background(), cs), srv, what)
			c.mu.Lock()
			c.got = got
			c.mu.Unlock()
		})
		return mcp.NewToolResultText("asking later"), nil
	}
	return mcp.NewToolResultText(request(ctx, server.ServerFromContext(ctx), what)), nil
}

func (c *Child) asked(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c.later.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return mcp.NewToolResultText(c.got), nil
}

// request makes the request what names of the client and returns its
// answer as JSON, or "error: ..." .
func request(ctx context.Context, srv *server.MCPServer, what string) string {
	var res any
	var err error
	switch what {
	case "sampling":
		res, err = srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hello")}},
			MaxTokens: 10}})
	case "elicitation":
		res, err = srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
			Message: "name?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}}})
	case "roots":
		res, err = srv.RequestRoots(ctx, mcp.ListRootsRequest{})
	default:
		err = fmt.Errorf("unknown request %q", what)
	}
	if err != nil {
		return "error: " + err.Error()
	}
	b, _ := json.Marshal(res)
	return string(b)
}

func (c *Child) log(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	params := map[string]any{"level": req.GetString("level", "error"), "data": req.GetString("text", "")}
	if l := req.GetString("logger", ""); l != "" {
		params["logger"] = l
	}
	srv := server.ServerFromContext(ctx)
	send := func(ctx context.Context) {
		c.flush.wait(func() { _ = srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationMessage), params) }, 1)
	}
	if req.GetBool("later", false) {
		cs := server.ClientSessionFromContext(ctx)
		after := c.flush.afterAnswer(ctx)
		c.later.Go(func() {
			after()
			send(srv.WithContext(context.Background(), cs))
		})
		return mcp.NewToolResultText("logging later"), nil
	}
	send(ctx)
	return mcp.NewToolResultText("logged"), nil
}

// Flusher is a stdio child's stdout, counting the notifications written.
type Flusher struct {
	W io.Writer

	mu      sync.Mutex
	written int // notifications
	answers int
	cond    *sync.Cond
}

func (f *Flusher) Write(p []byte) (int, error) {
	n, err := f.W.Write(p)
	var head struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	if json.Unmarshal(p, &head) == nil {
		f.mu.Lock()
		switch {
		case head.ID == nil && head.Method != "":
			f.written++
		case head.ID != nil && head.Method == "":
			f.answers++
		}
		f.cond.Broadcast()
		f.mu.Unlock()
	}
	return n, err
}

// NewFlusher returns a Flusher writing to w.
func NewFlusher(w io.Writer) *Flusher {
	f := &Flusher{W: w}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// wait runs send, which sends n notifications, and returns once they are
// written; without a Flusher (over HTTP, where mcp-go orders them itself)
// it only runs send.
func (f *Flusher) wait(send func(), n int) {
	if f == nil {
		send()
		return
	}
	f.mu.Lock()
	target := f.written + n
	f.mu.Unlock()
	send()
	f.mu.Lock()
	for f.written < target {
		f.cond.Wait()
	}
	f.mu.Unlock()
}

// afterAnswer returns a func that waits until the answer of the call being
// handled under ctx has been written: the next answer, for a stdio child
// (the tests make such calls one at a time); the end of the request, over
// HTTP.
func (f *Flusher) afterAnswer(ctx context.Context) func() {
	if f == nil {
		return func() { <-ctx.Done() }
	}
	f.mu.Lock()
	n := f.answers
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		for f.answers <= n {
			f.cond.Wait()
		}
		f.mu.Unlock()
	}
}
