// Package trafficchild is a test child server for the traffic mcpmux relays
// during a call: progress, log messages, and requests to the client
// (sampling, elicitation, roots), and what a client sends a child outside
// calls (cancellation, roots/list_changed), which it records. The same
// server runs over stdio (the trafficchild command) and, in process, over
// streamable HTTP.
package trafficchild

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Child is one traffic child server.
type Child struct {
	Server *server.MCPServer

	later sync.WaitGroup // work a tool left running after its answer
	// stop ends that work's waits when the child is closed.
	stop     context.Context
	stopWork context.CancelFunc
	mu       sync.Mutex
	got      string // what the last request made after an answer got back
	flush    *Flusher

	// RecordFile, when set, gets every line of the record as well, so that
	// it outlives the process (the command sets it from TRAFFICCHILD_RECORD).
	RecordFile string
	// Exit, when set, ends the process: hold calls it once cancelled if
	// asked to.
	Exit func()

	recMu  sync.Mutex
	record []string

	meetMu sync.Mutex
	meets  map[string]*meeting

	deferMu  sync.Mutex
	deferred []func() // run on the next notifications/roots/list_changed
}

// meeting is a barrier: its calls go on once n of them have arrived.
type meeting struct {
	n   int
	all chan struct{}
}

// New returns a child. flush, when not nil, is the writer of a stdio
// child's stdout: progress waits until it has been written, so that the
// child itself never lets its answer overtake its progress (mcp-go's stdio
// server writes notifications from another goroutine than answers).
func New(flush *Flusher) *Child {
	c := &Child{flush: flush, meets: map[string]*meeting{}}
	c.stop, c.stopWork = context.WithCancel(context.Background())
	hooks := &server.Hooks{}
	hooks.AddBeforeCallTool(func(_ context.Context, id any, req *mcp.CallToolRequest) {
		c.note("call %s %s %s", req.Params.Name, req.GetString("tag", ""), jsonOf(id))
	})
	s := server.NewMCPServer("traffic", "1", server.WithToolCapabilities(true), server.WithLogging(), server.WithHooks(hooks),
		server.WithPromptCapabilities(false), server.WithResourceCapabilities(false, false))
	c.Server = s
	s.AddNotificationHandler(string(mcp.MethodNotificationRootsListChanged), c.rootsChanged)
	s.AddTool(mcp.NewTool("traffic", mcp.WithString("tag"), mcp.WithString("meet"), mcp.WithNumber("n"),
		mcp.WithString("request")), c.traffic)
	s.AddTool(mcp.NewTool("hold", mcp.WithString("tag"), mcp.WithBoolean("exit"), mcp.WithReadOnlyHintAnnotation(true)), c.hold)
	s.AddTool(mcp.NewTool("progress", mcp.WithNumber("count"), mcp.WithString("tag"), mcp.WithBoolean("late")), c.progress)
	s.AddTool(mcp.NewTool("ask", mcp.WithString("what"), mcp.WithBoolean("later"), mcp.WithBoolean("deferred")), c.ask)
	s.AddTool(mcp.NewTool("asked", mcp.WithString("what")), c.asked)
	s.AddTool(mcp.NewTool("asks", mcp.WithString("tag"), mcp.WithString("rounds"), mcp.WithString("gate")), c.asks)
	// The same asks as a prompt (arguments tag, rounds) and as a resource
	// (traffic://asks/TAG?rounds=...), answering with the same text.
	s.AddPrompt(mcp.NewPrompt("asks", mcp.WithArgument("tag"), mcp.WithArgument("rounds")),
		func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			text, err := c.askRounds(ctx, req.Params.Arguments["tag"], req.Params.Arguments["rounds"], "", req.Params.Meta)
			if err != nil {
				return nil, err
			}
			return mcp.NewGetPromptResult("asks", []mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(text))}), nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate("traffic://asks/{tag}{?rounds}", "asks"),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			// mcp-go gives a template's variables as the values matched.
			arg := func(k string) string {
				if v, ok := req.Params.Arguments[k].([]string); ok && len(v) > 0 {
					return v[0]
				}
				return ""
			}
			text, err := c.askRounds(ctx, arg("tag"), arg("rounds"), "", req.Params.Meta)
			if err != nil {
				return nil, err
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: text}}, nil
		})
	s.AddTool(mcp.NewTool("log", mcp.WithString("level"), mcp.WithString("logger"), mcp.WithString("text"),
		mcp.WithBoolean("later"), mcp.WithBoolean("deferred")), c.log)
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
	// Progress i of n, or nothing when the client asked for none.
	progress := func(i int) []note {
		if req.Params.Meta == nil || req.Params.Meta.ProgressToken == nil {
			return nil
		}
		return []note{{string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": n, "message": fmt.Sprintf("%s %d", tag, i)}}}
	}
	srv := server.ServerFromContext(ctx)
	if req.GetBool("late", false) {
		after := c.flush.afterAnswer(ctx)
		c.later.Go(func() {
			after()
			c.flush.notify(ctx, srv, progress(0)...)
		})
		return mcp.NewToolResultText("late " + tag), nil
	}
	var notes []note
	for i := 1; i <= n; i++ {
		notes = append(notes, progress(i)...)
	}
	c.flush.notify(ctx, srv, notes...)
	return mcp.NewToolResultText("done " + tag), nil
}

// ask makes one request of the client and answers with what it got; with
// later, it answers first and makes the request afterwards (asked returns
// what it got); with deferred, it makes it, outside any call, on the next
// notifications/roots/list_changed. Either records "asked <what> <got>".
func (c *Child) ask(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	what := req.GetString("what", "")
	if req.GetBool("deferred", false) {
		srv, cs := server.ServerFromContext(ctx), server.ClientSessionFromContext(ctx)
		c.deferUntilRootsChanged(func() {
			ctx, cancel := context.WithTimeout(srv.WithContext(c.stop, cs), 30*time.Second)
			defer cancel()
			c.note("asked %s %s", what, request(ctx, srv, what))
		})
		return mcp.NewToolResultText("asking on roots/list_changed"), nil
	}
	if req.GetBool("later", false) {
		srv, cs := server.ServerFromContext(ctx), server.ClientSessionFromContext(ctx)
		after := c.flush.afterAnswer(ctx)
		c.later.Go(func() {
			after()
			got := request(srv.WithContext(c.stop, cs), srv, what)
			c.note("asked %s %s", what, got)
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
		c.flush.notify(ctx, srv, note{string(mcp.MethodNotificationMessage), params})
	}
	if req.GetBool("deferred", false) {
		cs := server.ClientSessionFromContext(ctx)
		c.deferUntilRootsChanged(func() { send(srv.WithContext(context.Background(), cs)) })
		return mcp.NewToolResultText("logging on roots/list_changed"), nil
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

// traffic is a call that does everything at once: once n calls naming the
// same meet have arrived (so that they are all in flight together), it
// sends progress (if the client asked for it) and a log message naming its
// tag, makes the request named by request of the client if told to, waits
// for the n calls to have got that far, and answers with its tag and what
// the request got.
func (c *Child) traffic(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tag, meet, n := req.GetString("tag", ""), req.GetString("meet", ""), req.GetInt("n", 1)
	if meet != "" {
		if err := c.meet(ctx, meet, n); err != nil {
			return nil, err
		}
	}
	srv := server.ServerFromContext(ctx)
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		c.flush.notify(ctx, srv, note{string(mcp.MethodNotificationProgress), map[string]any{
			"progressToken": req.Params.Meta.ProgressToken, "progress": 1, "message": tag}})
	}
	c.flush.notify(ctx, srv, note{string(mcp.MethodNotificationMessage), map[string]any{
		"level": "error", "logger": "traffic", "data": "log of " + tag}})
	answer := tag
	if what := req.GetString("request", ""); what != "" {
		answer += ": " + request(ctx, srv, what)
	}
	if meet != "" {
		if err := c.meet(ctx, meet+"/done", n); err != nil {
			return nil, err
		}
	}
	return mcp.NewToolResultText(answer), nil
}

// asks makes the requests rounds names of the client: rounds separated by
// "/", the requests of a round ("sampling", "elicitation", "roots")
// separated by "+" and made at once. Before each round it sends progress
// (if the client asked for it) and a log message naming the round; each
// round waits for the one before to be answered, or, with gate, every
// round after the first waits instead until Meet(gate, 2) is called. It
// answers with its tag and what each request got, in order.
func (c *Child) asks(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := c.askRounds(ctx, req.GetString("tag", ""), req.GetString("rounds", ""), req.GetString("gate", ""), req.Params.Meta)
	if err != nil {
		return nil, err
	}
	return mcp.NewToolResultText(text), nil
}

// askRounds is asks for a request whose _meta is meta.
func (c *Child) askRounds(ctx context.Context, tag, spec, gate string, meta *mcp.Meta) (string, error) {
	srv := server.ServerFromContext(ctx)
	var got []string
	var mu sync.Mutex
	var rounds []*sync.WaitGroup
	for i, round := range strings.Split(spec, "/") {
		if i > 0 && gate != "" {
			if err := c.meet(ctx, gate, 2); err != nil {
				return "", err
			}
		}
		var notes []note
		if meta != nil && meta.ProgressToken != nil {
			notes = append(notes, note{string(mcp.MethodNotificationProgress), map[string]any{
				"progressToken": meta.ProgressToken, "progress": i + 1, "message": fmt.Sprintf("%s round %d", tag, i+1)}})
		}
		notes = append(notes, note{string(mcp.MethodNotificationMessage), map[string]any{
			"level": "error", "logger": "traffic", "data": fmt.Sprintf("round %d of %s", i+1, tag)}})
		c.flush.notify(ctx, srv, notes...)
		var wg sync.WaitGroup
		for _, what := range strings.Split(round, "+") {
			mu.Lock()
			got = append(got, "")
			at := len(got) - 1
			mu.Unlock()
			do := func() {
				answer := what + " " + request(ctx, srv, what)
				mu.Lock()
				got[at] = answer
				mu.Unlock()
			}
			wg.Go(do)
		}
		if gate == "" {
			wg.Wait()
		}
		rounds = append(rounds, &wg)
	}
	for _, wg := range rounds {
		wg.Wait()
	}
	return tag + ": " + strings.Join(got, " | "), nil
}

// Meet is one of the n calls meet waits for under name, from the test: it
// releases a gate of asks.
func (c *Child) Meet(ctx context.Context, name string, n int) error { return c.meet(ctx, name, n) }

// meet waits until n calls have met under name.
func (c *Child) meet(ctx context.Context, name string, n int) error {
	c.meetMu.Lock()
	m := c.meets[name]
	if m == nil {
		m = &meeting{all: make(chan struct{})}
		c.meets[name] = m
	}
	m.n++
	if m.n == n {
		close(m.all)
	}
	c.meetMu.Unlock()
	select {
	case <-m.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hold records that it started and waits to be cancelled; with exit, the
// process then ends (when Exit is set), as a child that dies of it would.
func (c *Child) hold(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	tag := req.GetString("tag", "")
	c.note("hold %s started", tag)
	<-ctx.Done()
	c.note("hold %s ended", tag)
	if req.GetBool("exit", false) && c.Exit != nil {
		c.Exit()
	}
	return nil, ctx.Err()
}

// deferUntilRootsChanged has f run on the next
// notifications/roots/list_changed: something a test wants done outside any
// call, at a moment it chooses (a notification is no call).
func (c *Child) deferUntilRootsChanged(f func()) {
	c.deferMu.Lock()
	defer c.deferMu.Unlock()
	c.deferred = append(c.deferred, f)
}

// rootsChanged records a notifications/roots/list_changed, runs what was
// deferred to it, and asks the client for its roots, outside any call,
// recording what it got.
func (c *Child) rootsChanged(ctx context.Context, _ mcp.JSONRPCNotification) {
	c.note("roots-changed")
	srv, cs := server.ServerFromContext(ctx), server.ClientSessionFromContext(ctx)
	c.deferMu.Lock()
	deferred := c.deferred
	c.deferred = nil
	c.deferMu.Unlock()
	// Not on the goroutine that reads the client's messages: answers come
	// in through it.
	c.later.Go(func() {
		for _, f := range deferred {
			f()
		}
		if srv == nil || cs == nil {
			return
		}
		ctx, cancel := context.WithTimeout(srv.WithContext(c.stop, cs), 30*time.Second)
		defer cancel()
		c.note("roots %s", request(ctx, srv, "roots"))
	})
}

// Close ends the work the child's tools left running and waits for it.
func (c *Child) Close() {
	c.stopWork()
	c.later.Wait()
}

// note adds a line to the record.
func (c *Child) note(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	c.recMu.Lock()
	defer c.recMu.Unlock()
	c.record = append(c.record, line)
	if c.RecordFile != "" {
		if f, err := os.OpenFile(c.RecordFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, _ = f.WriteString(line + "\n")
			_ = f.Close()
		}
	}
}

// Record returns the lines recorded so far: "call <tool> <tag> <id>" for
// each tools/call (id as JSON), "cancelled <id>" for each
// notifications/cancelled, "hold <tag> started|ended", "asked <what>
// <answer>", "roots-changed", "roots <answer>" and "reply <result>" for
// each answer to a request of the child's, as the client sent it.
func (c *Child) Record() []string {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	return append([]string(nil), c.record...)
}

// ReadRecord returns the lines a child recorded in the file path.
func ReadRecord(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Saw records what the child needs to know of a message a client sent it
// that mcp-go keeps from its handlers: a notifications/cancelled.
func (c *Child) Saw(msg []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	switch {
	case json.Unmarshal(msg, &m) != nil:
	case m.Method == string(mcp.MethodNotificationCancelled):
		c.note("cancelled %s", m.Params.RequestID)
	case m.Method == "" && m.Result != nil:
		c.note("reply %s", m.Result)
	}
}

// Tap returns r, each of whose lines Saw sees as it is read.
func (c *Child) Tap(r io.Reader) io.Reader {
	return &tap{c: c, r: r}
}

type tap struct {
	c    *Child
	r    io.Reader
	line []byte
}

func (t *tap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.line = append(t.line, p[:n]...)
	for {
		i := bytes.IndexByte(t.line, '\n')
		if i < 0 {
			break
		}
		t.c.Saw(t.line[:i])
		t.line = t.line[i+1:]
	}
	return n, err
}

// Handler returns h, each of whose POST bodies Saw sees first.
func (c *Child) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			c.Saw(body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Flusher is a stdio child's stdout, counting the notifications written,
// each by its method and params, and the answers.
type Flusher struct {
	W io.Writer

	mu      sync.Mutex
	written map[string]int // notifications, by noteKey
	answers int
	cond    *sync.Cond
}

func (f *Flusher) Write(p []byte) (int, error) {
	n, err := f.W.Write(p)
	var head struct {
		ID     any             `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(p, &head) == nil {
		f.mu.Lock()
		switch {
		case head.ID == nil && head.Method != "":
			f.written[noteKey(head.Method, head.Params)]++
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
	f := &Flusher{W: w, written: map[string]int{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// note is a notification a tool sends.
type note struct {
	method string
	params map[string]any
}

// noteKey is what tells a notification from others: its method and its
// params, as canonical JSON (keys sorted, numbers as encoding/json writes
// a float64), whichever JSON they were written as.
func noteKey(method string, params json.RawMessage) string {
	var v any
	if json.Unmarshal(params, &v) != nil {
		return method + " " + string(params)
	}
	b, _ := json.Marshal(v)
	return method + " " + string(b)
}

// notify sends notes to the client of the session under ctx, in order,
// and returns once wait would.
func (f *Flusher) notify(ctx context.Context, srv *server.MCPServer, notes ...note) {
	f.wait(func() {
		for _, n := range notes {
			_ = srv.SendNotificationToClient(ctx, n.method, n.params)
		}
	}, notes...)
}

// wait runs send, which sends notes, and returns once each of them has
// been written: what other calls send at the same time counts only where
// it is the same notification as one of notes (mcp-go's stdio server
// writes notifications on a goroutine of their own, answers on the
// request's, so a wait that counted others' would let this call's answer
// overtake its own). Without a Flusher (over HTTP,
// where mcp-go orders them itself) it only runs send.
func (f *Flusher) wait(send func(), notes ...note) {
	if f == nil {
		send()
		return
	}
	// How many of each are to have been written once notes are.
	target := map[string]int{}
	f.mu.Lock()
	for _, n := range notes {
		b, _ := json.Marshal(n.params)
		k := noteKey(n.method, b)
		if _, ok := target[k]; !ok {
			target[k] = f.written[k]
		}
		target[k]++
	}
	f.mu.Unlock()
	send()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, want := range target {
		for f.written[k] < want {
			f.cond.Wait()
		}
	}
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
