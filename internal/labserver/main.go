// Command labserver is a small, disposable MCP server used as a downstream
// child in mcpmux tests. It speaks MCP over stdio (mcp-go) and offers tools
// that exercise error results, structured output, raw JSON schemas,
// cancellation, crashes, process groups and tools/list_changed.
//
// With LAB_RECORDS_DIR set it also offers two tools for the chaos soak,
// which keep their own record of every call they run, so that a test can
// tell from the child's side what ran, where and how often:
//
//	probe  (read-only) {nonce, ms}: records the nonce, waits ms, answers
//	record (a write)   {id, ms}:    records the id, waits ms, answers
//
// Each records, before it waits or answers, one JSON line
// {"op","key","source","pid"} in <LAB_RECORDS_DIR>/<pid>.jsonl; the line is
// written with one write(2), so it survives a SIGKILL of the process the
// moment the call returns. Both answer with the JSON text
// {"op","key","source","pid"} of the record they made.
//
// Environment:
//
//	LAB_SOURCE         label used in answers (default "docs")
//	LAB_META_TOOL=1    offer the tool meta, which answers with its call's _meta
//	LAB_NOTES          file that append_note appends to
//	LAB_STARTED_DIR    directory where slow drops a file named after its tag
//	LAB_RECORDS_DIR    directory for probe's and record's records (the tools
//	                   are offered only when it is set)
//	LAB_PAGE_SIZE      page size of every list (pagination off when unset)
//	LAB_FAIL_INIT=1    exit with code 3 at once, before serving
//	LAB_FAIL_INIT_FILE exit with code 3 at start while this file exists
//	LAB_START_DELAY_MS wait this long before serving (a slow start)
//	LAB_START_GATE     wait until this file exists before serving (a start
//	                   that a test lets happen when it chooses)
//	LAB_HTTP_ADDR      serve MCP over HTTP on this address instead of stdio
//	LAB_HTTP_TRANSPORT "sse" for the legacy SSE transport (default streamable)
//	LAB_ADDR_FILE      where to write the address bound, for LAB_HTTP_ADDR=...:0
//	LAB_SILENT=1       read stdin but never answer; exit 0 when stdin closes
//	LAB_FIDELITY=1     also offer prompts, resources, templates, completion and
//	                   the tools of fidelity.go
//	LAB_REQUESTS       file every request received is appended to (fidelity.go)
//	LAB_DEFS           JSON file of further tools and prompts, and reload_defs (defs.go)
//	LAB_INSTRUCTIONS   the instructions its initialize answer carries
//	LAB_TASKS=1        also declare tasks and offer task_wait and release (tasks.go)
//	LAB_OTLP_ENDPOINT  emit a span of the lab's own for every call, prompt and
//	                   read, the child of its _meta's traceparent (trace.go)
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

const pickSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","description":"either an id or a name","type":"object","minProperties":1,"oneOf":[{"required":["id"]},{"required":["name"]}],"properties":{"id":{"type":"integer"},"name":{"type":"string"}},"additionalProperties":false}`

const echoOutputSchema = `{"type":"object","properties":{"source":{"type":"string"},"message":{"type":"string"}},"required":["source","message"]}`

func main() {
	source := os.Getenv("LAB_SOURCE")
	if source == "" {
		source = "docs"
	}
	pid := os.Getpid()

	if os.Getenv("LAB_FAIL_INIT") == "1" {
		fmt.Fprintf(os.Stderr, "labserver %s pid %d failing at start (LAB_FAIL_INIT)\n", source, pid)
		os.Exit(3)
	}
	if f := os.Getenv("LAB_FAIL_INIT_FILE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			fmt.Fprintf(os.Stderr, "labserver %s pid %d failing at start (%s exists)\n", source, pid, f)
			os.Exit(3)
		}
	}
	if os.Getenv("LAB_SILENT") == "1" {
		fmt.Fprintf(os.Stderr, "labserver %s pid %d silent\n", source, pid)
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}

	if v := os.Getenv("LAB_START_DELAY_MS"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			fmt.Fprintf(os.Stderr, "labserver: bad LAB_START_DELAY_MS %q\n", v)
			os.Exit(2)
		}
		time.Sleep(time.Duration(ms) * time.Millisecond) // a slow start is what it simulates
	}

	if gate := os.Getenv("LAB_START_GATE"); gate != "" {
		// Polled: the child has nothing else to do until the test lets it
		// start, and mcpmux's startup_timeout bounds the wait.
		for _, err := os.Stat(gate); err != nil; _, err = os.Stat(gate) {
			time.Sleep(10 * time.Millisecond)
		}
	}

	opts := []server.ServerOption{server.WithToolCapabilities(true)}
	if v := os.Getenv("LAB_INSTRUCTIONS"); v != "" {
		opts = append(opts, server.WithInstructions(v))
	}
	if v := os.Getenv("LAB_PAGE_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "labserver: bad LAB_PAGE_SIZE %q\n", v)
			os.Exit(2)
		}
		opts = append(opts, server.WithPaginationLimit(n))
	}
	fidelity := os.Getenv("LAB_FIDELITY") == "1"
	defs := os.Getenv("LAB_DEFS")
	if defs != "" {
		opts = append(opts, defsOptions()...)
	}
	var taskGates *gates
	if os.Getenv("LAB_TASKS") == "1" {
		taskGates = newGates()
		opts = append(opts, tasksOptions(taskGates)...)
	}
	hooks := &server.Hooks{}
	subs := &subscribed{uris: map[string]bool{}}
	if fidelity {
		opts = append(opts, fidelityOptions()...)
		trackSubscriptions(hooks, subs)
	}
	if path := os.Getenv("LAB_REQUESTS"); path != "" {
		if err := recordRequests(hooks, path); err != nil {
			fmt.Fprintf(os.Stderr, "labserver: LAB_REQUESTS: %v\n", err)
			os.Exit(2)
		}
	}
	if endpoint := os.Getenv("LAB_OTLP_ENDPOINT"); endpoint != "" {
		stop, err := traceRequests(hooks, endpoint)
		if err != nil {
			fmt.Fprintf(os.Stderr, "labserver: LAB_OTLP_ENDPOINT: %v\n", err)
			os.Exit(2)
		}
		defer stop()
	}
	s := server.NewMCPServer("labserver", "0.1.0", append(opts, server.WithHooks(hooks))...)
	register(s, source)
	if fidelity {
		registerFidelity(s, source, subs)
	}
	if taskGates != nil {
		registerTasks(s, taskGates)
	}
	if defs != "" {
		if err := registerDefs(s, defs); err != nil {
			fmt.Fprintf(os.Stderr, "labserver: LAB_DEFS: %v\n", err)
			os.Exit(2)
		}
	}
	if dir := os.Getenv("LAB_RECORDS_DIR"); dir != "" {
		if err := registerRecorded(s, source, pid, dir); err != nil {
			fmt.Fprintf(os.Stderr, "labserver: LAB_RECORDS_DIR: %v\n", err)
			os.Exit(2)
		}
	}

	if addr := os.Getenv("LAB_HTTP_ADDR"); addr != "" {
		serveHTTP(s, source, pid, addr)
		return
	}

	fmt.Fprintf(os.Stderr, "labserver %s pid %d ready\n", source, pid)
	if err := serveStdio(s, fidelity); err != nil {
		fmt.Fprintf(os.Stderr, "labserver: serve: %v\n", err)
		os.Exit(1)
	}
}

// serveHTTP serves MCP over HTTP on addr (streamable HTTP at /mcp, or the
// legacy SSE transport at /sse and /message with LAB_HTTP_TRANSPORT=sse) and
// writes the address it bound to the file LAB_ADDR_FILE, so that a test can
// use port 0.
func serveHTTP(s *server.MCPServer, source string, pid int, addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labserver: listen: %v\n", err)
		os.Exit(1)
	}
	var h http.Handler
	path := "/mcp"
	if os.Getenv("LAB_HTTP_TRANSPORT") == "sse" {
		h, path = server.NewSSEServer(s, server.WithBaseURL("http://"+ln.Addr().String())), "/sse"
	} else {
		h = server.NewStreamableHTTPServer(s, server.WithStateful(true))
	}
	if f := os.Getenv("LAB_ADDR_FILE"); f != "" {
		tmp := f + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o644); err != nil || os.Rename(tmp, f) != nil {
			fmt.Fprintf(os.Stderr, "labserver: cannot write %s\n", f)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "labserver %s pid %d ready on http://%s%s\n", source, pid, ln.Addr(), path)
	if err := http.Serve(ln, h); err != nil {
		fmt.Fprintf(os.Stderr, "labserver: serve: %v\n", err)
		os.Exit(1)
	}
}

// annotations builds a complete set of hints. readOnly tools are also
// idempotent; no tool reaches outside the local machine.
func annotations(readOnly, destructive bool) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{
		ReadOnlyHint:    mcp.ToBoolPtr(readOnly),
		DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint:  mcp.ToBoolPtr(readOnly),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	}
}

// sleepCtx waits d or until ctx ends; it reports whether the full wait elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func register(s *server.MCPServer, source string) {
	s.AddTool(mcp.NewTool("search",
		mcp.WithDescription("Search the lab source. query must be 'public' or 'private'."),
		mcp.WithString("query", mcp.Required()),
		mcp.WithToolAnnotation(annotations(true, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		query := req.GetString("query", "")
		switch query {
		case "public":
			return mcp.NewToolResultText(source + ": public evidence"), nil
		case "private":
			return mcp.NewToolResultError("service policy denies private data"), nil
		default:
			return mcp.NewToolResultError("unknown query"), nil
		}
	})

	s.AddTool(mcp.NewTool("crash_for_test",
		mcp.WithDescription("Local fault injection only; terminate this disposable test server."),
		mcp.WithToolAnnotation(annotations(false, true)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(7)
		return nil, nil
	})

	s.AddTool(mcp.NewTool("append_note",
		mcp.WithDescription("Append a line to the LAB_NOTES file, then wait delay_ms before answering."),
		mcp.WithString("text", mcp.Required()),
		mcp.WithInteger("delay_ms", mcp.Min(0)),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		path := os.Getenv("LAB_NOTES")
		if path == "" {
			return mcp.NewToolResultError("LAB_NOTES is not set"), nil
		}
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		_, werr := f.WriteString(text + "\n")
		cerr := f.Close()
		if werr != nil {
			return mcp.NewToolResultError(werr.Error()), nil
		}
		if cerr != nil {
			return mcp.NewToolResultError(cerr.Error()), nil
		}
		delay := req.GetInt("delay_ms", 0)
		if !sleepCtx(ctx, time.Duration(delay)*time.Millisecond) {
			return mcp.NewToolResultError("cancelled"), nil
		}
		return mcp.NewToolResultText("noted"), nil
	})

	s.AddTool(mcp.NewTool("slow",
		mcp.WithDescription("Wait ms milliseconds, then answer. Drops <LAB_STARTED_DIR>/<tag> first."),
		mcp.WithInteger("ms", mcp.Required(), mcp.Min(0)),
		mcp.WithString("tag"),
		mcp.WithToolAnnotation(annotations(true, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ms, err := req.RequireInt("ms")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		if ms < 0 {
			return mcp.NewToolResultError("ms must be >= 0"), nil
		}
		tag := req.GetString("tag", "")
		if dir := os.Getenv("LAB_STARTED_DIR"); dir != "" {
			name := filepath.Base(tag)
			if tag == "" || name == "." || name == "/" || name == ".." {
				name = "untagged"
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
		}
		if !sleepCtx(ctx, time.Duration(ms)*time.Millisecond) {
			// Tests read this from mcpmux's log to see the cancellation arrive.
			fmt.Fprintf(os.Stderr, "labserver %s slow %s cancelled\n", source, tag)
			return mcp.NewToolResultError("cancelled"), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("slept %d tag=%s", ms, tag)), nil
	})

	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Echo a message, as text and as structured content."),
		mcp.WithString("message"),
		mcp.WithRawOutputSchema(json.RawMessage(echoOutputSchema)),
		mcp.WithToolAnnotation(annotations(true, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		msg := req.GetString("message", "")
		return mcp.NewToolResultStructured(
			map[string]any{"source": source, "message": msg},
			source+": "+msg,
		), nil
	})

	if os.Getenv("LAB_META_TOOL") != "" {
		addMetaTool(s)
	}

	pick := mcp.NewToolWithRawSchema("pick", "Pick an item by id or by name.", json.RawMessage(pickSchema))
	pick.Annotations = annotations(true, false)
	s.AddTool(pick, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.GetArguments()
		if v, ok := args["id"]; ok {
			switch n := v.(type) {
			case float64:
				return mcp.NewToolResultText(fmt.Sprintf("picked %s", strconv.FormatFloat(n, 'f', -1, 64))), nil
			case json.Number:
				return mcp.NewToolResultText("picked " + n.String()), nil
			default:
				return mcp.NewToolResultError("id must be an integer"), nil
			}
		}
		if v, ok := args["name"]; ok {
			name, ok := v.(string)
			if !ok {
				return mcp.NewToolResultError("name must be a string"), nil
			}
			return mcp.NewToolResultText("picked " + name), nil
		}
		return mcp.NewToolResultError("either id or name is required"), nil
	})

	s.AddTool(mcp.NewTool("whoami",
		mcp.WithDescription("Return this server's process id."),
		mcp.WithToolAnnotation(annotations(true, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
	})

	s.AddTool(mcp.NewTool("spawn_grandchild",
		mcp.WithDescription("Start a long-lived 'sleep 1000' that inherits this server's stdout and stderr; return its pid."),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cmd := exec.Command("sleep", "1000")
		// Like an npx wrapper's real server, the grandchild holds the
		// child's output pipes open.
		cmd.Stdout = os.Stdout
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		go func() { _ = cmd.Wait() }() // reap it if it dies while we live
		return mcp.NewToolResultText(strconv.Itoa(cmd.Process.Pid)), nil
	})

	var (
		extraMu sync.Mutex
		extraOn bool
	)
	extra := mcp.NewTool("extra",
		mcp.WithDescription("A tool that notify_changed adds and removes."),
		mcp.WithToolAnnotation(annotations(true, false)),
	)
	s.AddTool(mcp.NewTool("notify_changed",
		mcp.WithDescription("Toggle the 'extra' tool, which sends notifications/tools/list_changed."),
		mcp.WithToolAnnotation(annotations(false, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		extraMu.Lock()
		defer extraMu.Unlock()
		// AddTool and DeleteTools broadcast notifications/tools/list_changed
		// themselves, because the tools capability has listChanged on.
		if extraOn {
			s.DeleteTools("extra")
			extraOn = false
			return mcp.NewToolResultText("extra off"), nil
		}
		s.AddTool(extra, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(source + ": extra"), nil
		})
		extraOn = true
		return mcp.NewToolResultText("extra on"), nil
	})
}

// Record is one line of a records file, and the answer of the call that
// wrote it.
type Record struct {
	Op     string `json:"op"`  // "probe" or "record"
	Key    string `json:"key"` // the probe's nonce or the record's id
	Source string `json:"source"`
	Pid    int    `json:"pid"`
}

// registerRecorded adds probe and record, which append to
// <dir>/<pid>.jsonl. The file is opened once and kept open, so a call
// costs one write(2).
func registerRecorded(s *server.MCPServer, source string, pid int, dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(pid)+".jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// The file stays open for the life of the process; *os.File serialises
	// concurrent writes, and O_APPEND keeps each line whole.
	handle := func(op, keyArg string) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, err := req.RequireString(keyArg)
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			ms := req.GetInt("ms", 0)
			if ms < 0 {
				return mcp.NewToolResultError("ms must be >= 0"), nil
			}
			rec, _ := json.Marshal(Record{Op: op, Key: key, Source: source, Pid: pid})
			if _, err := f.Write(append(rec, '\n')); err != nil {
				return mcp.NewToolResultError("recording: " + err.Error()), nil
			}
			if !sleepCtx(ctx, time.Duration(ms)*time.Millisecond) {
				return mcp.NewToolResultError("cancelled"), nil
			}
			return mcp.NewToolResultText(string(rec)), nil
		}
	}
	s.AddTool(mcp.NewTool("probe",
		mcp.WithDescription("Record the nonce, wait ms milliseconds, answer with the record."),
		mcp.WithString("nonce", mcp.Required()),
		mcp.WithInteger("ms", mcp.Min(0)),
		mcp.WithToolAnnotation(annotations(true, false)),
	), handle("probe", "nonce"))
	s.AddTool(mcp.NewTool("record",
		mcp.WithDescription("Record the id (a write), wait ms milliseconds, answer with the record."),
		mcp.WithString("id", mcp.Required()),
		mcp.WithInteger("ms", mcp.Min(0)),
		mcp.WithToolAnnotation(annotations(false, false)),
	), handle("record", "id"))
	return nil
}

// addMetaTool adds "meta", which answers with the params._meta its call
// came with, as JSON text: what one hop of a trace carried (LAB_META_TOOL).
func addMetaTool(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("meta",
		mcp.WithDescription("Answer with the params._meta the call came with, as JSON text (what a trace's hop carried)."),
		mcp.WithToolAnnotation(annotations(true, false)),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := json.Marshal(req.Params.Meta)
		if err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
		return mcp.NewToolResultText(string(b)), nil
	})
}
