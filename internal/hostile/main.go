// Command hostile is a test child for mcpmux that misbehaves on request. It
// speaks MCP over stdio written by hand (encoding/json and bufio, not
// mcp-go's server), so that it can send what a well-behaved server library
// never would: non-JSON lines, answers to requests nobody made, a line that
// never ends, a flood of stderr, an exit in the middle of a call.
//
// Environment:
//
//	HOSTILE_TOOLS    a file holding the JSON array that tools/list answers
//	                 with, sent verbatim (default: one tool, "echo")
//	HOSTILE_HUGE_MB  how many MiB the "huge" tool writes without a newline
//	                 (default 80)
//	HOSTILE_FLOOD    "message", "progress" or "list_changed": from the first
//	                 tools/list on, send notifications of that kind as fast
//	                 as stdout takes them, for good; every 10,000th is
//	                 reported on stderr as "hostile flooded N"
//	HOSTILE_SKIP     "1": answer only every other tools/call (the 1st, 3rd,
//	                 ...); the others are never answered and reported on
//	                 stderr as "hostile skipped ID"
//	HOSTILE_PAGES    list the tools over this many pages: page 1 holds the
//	                 tools above, page N (N > 1) one tool "pageN" (default 1)
//	HOSTILE_PAGE_PAD bytes of description each "pageN" tool carries
//	HOSTILE_EOF_REQUEST a method: when stdin ends, send mcpmux a request
//	                 of it (id "at-eof") and stay until a signal ends the
//	                 process, as a server that asks its client something
//	                 while it is being stopped (server-everything's
//	                 roots/list)
//
// tools/call, by tool name:
//
//	echo     {"content":[{"type":"text","text":<the arguments JSON, as sent>}]}
//	rpcerror a JSON-RPC error {"code":-32602,"message":"child says no"}
//	bigerr   a 200 KiB stderr line, then 1000 short ones, then "ok"
//	huge     the start of an answer, HOSTILE_HUGE_MB MiB long, that never
//	         ends: no newline, and stdout stays held for good
//	garbage  a line that is not JSON, then "ok"
//	wrongid  an answer under an id that was never asked, and never the real one
//	twice    {"kb":N}: two answers under the call's id in one write: "first",
//	         then one of N KiB (default 8) of "y", large enough for mcpmux to
//	         take it past mcp-go's decoding
//	exit     exits with status 3 without answering
//	bigline  one whole answer line of {"mb":N} MiB (default 20), newline and
//	         all, then business as usual
//	held     answers "held" only once the first bigline answer is written,
//	         so that it is in flight when that answer comes
//	bignote  {"mb":N}: a notifications/message line of N MiB (default 20),
//	         then the answer "ok"
//	noted    {"text":T}: a notifications/message line (level info, data T)
//	         and the answer T in one write, so that mcpmux reads the
//	         answer right behind the log message
//	flood    {"method":M,"count":N,"add":NAME}: N notifications of method M
//	         at once; before the last one, a tool NAME (if given) joins the
//	         list; then the answer "flooded N"
//	grow     {"pages":N,"pad":B}: from now on tools/list pages as
//	         HOSTILE_PAGES=N and HOSTILE_PAGE_PAD=B would; sends
//	         tools/list_changed
//	stats    {"tools_list":N,"flooded":M}: how many tools/list requests came
//	         so far, and how many notifications HOSTILE_FLOOD has sent
//	fork_exit starts a "sleep 1000" that holds stdout open, answers with its
//	         pid, and exits with status 0
//	anything else: as echo
//
// On stderr it says "hostile call NAME" for every call (NAME being its own
// name for the tool, so tests can tell where mcpmux routed a call) and
// "hostile cancelled ID" for every notifications/cancelled.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// out serialises whole lines on stdout: one Write per message.
var out struct {
	sync.Mutex
	w io.Writer
}

var (
	wrongIDs   atomic.Int64
	calls      atomic.Int64 // tools/call requests so far
	listed     atomic.Int64 // tools/list requests so far
	flooded    atomic.Int64 // notifications floodForever sent so far
	floodStart sync.Once
	added      atomic.Pointer[string] // a tool flood added
	paging     atomic.Pointer[pages]
	bigSent    = make(chan struct{}) // closed once a bigline answer is out
	bigOnce    sync.Once
)

// pages is how tools/list is paged.
type pages struct{ n, pad int }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func main() {
	out.w = os.Stdout
	paging.Store(&pages{n: envInt("HOSTILE_PAGES", 1), pad: envInt("HOSTILE_PAGE_PAD", 0)})
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var msg message
			if jerr := json.Unmarshal(line, &msg); jerr != nil {
				fmt.Fprintf(os.Stderr, "hostile: unreadable line: %v\n", jerr)
			} else {
				go handle(msg)
			}
		}
		if err != nil {
			if method := os.Getenv("HOSTILE_EOF_REQUEST"); method != "" {
				writeLine(concat(`{"jsonrpc":"2.0","id":"at-eof","method":`, strconv.Quote(method), `}`))
				fmt.Fprintf(os.Stderr, "hostile asked %s at the end of its stdin\n", method)
				time.Sleep(time.Hour) // until mcpmux's SIGTERM ends it
			}
			return
		}
	}
}

func handle(msg message) {
	if len(msg.ID) == 0 || string(msg.ID) == "null" {
		// A notification: nothing to answer. Cancellations are reported, so
		// tests can tell that one arrived.
		if msg.Method == "notifications/cancelled" {
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(msg.Params, &p)
			fmt.Fprintf(os.Stderr, "hostile cancelled %s\n", p.RequestID)
		}
		return
	}
	if msg.Method == "" {
		return // an answer to something: hostile never asks anything
	}
	switch msg.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &p)
		result(msg.ID, map[string]any{
			"protocolVersion": p.ProtocolVersion,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}},
			"serverInfo":      map[string]any{"name": "hostile", "version": "1"},
		})
	case "ping":
		result(msg.ID, map[string]any{})
	case "tools/list":
		listed.Add(1)
		if kind := os.Getenv("HOSTILE_FLOOD"); kind != "" {
			floodStart.Do(func() { go floodForever(kind) })
		}
		listTools(msg)
	case "tools/call":
		call(msg)
	default:
		rpcError(msg.ID, -32601, "method not found: "+msg.Method)
	}
}

// listTools answers tools/list, one page of it.
func listTools(msg message) {
	tools := []byte(`[{"name":"echo","inputSchema":{"type":"object"}}]`)
	if path := os.Getenv("HOSTILE_TOOLS"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			rpcError(msg.ID, -32603, err.Error())
			return
		}
		tools = bytes.TrimSpace(b)
	}
	if name := added.Load(); name != nil {
		sep := ","
		if bytes.Equal(tools, []byte("[]")) {
			sep = ""
		}
		tools = concat(strings.TrimSuffix(string(tools), "]"), sep, `{"name":"`, *name, `","inputSchema":{"type":"object"}}]`)
	}
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	page := 1
	if n, err := strconv.Atoi(strings.TrimPrefix(p.Cursor, "page")); err == nil {
		page = n
	}
	pg := paging.Load()
	if page > 1 {
		desc, _ := json.Marshal(strings.Repeat("p", pg.pad))
		tools = concat(`[{"name":"page`, strconv.Itoa(page), `","description":`, string(desc), `,"inputSchema":{"type":"object"}}]`)
	}
	next := ""
	if page < pg.n {
		next = `,"nextCursor":"page` + strconv.Itoa(page+1) + `"`
	}
	// Verbatim: whatever the file holds is what mcpmux gets.
	writeLine(concat(`{"jsonrpc":"2.0","id":`, string(msg.ID), `,"result":{"tools":`, string(tools), next, `}}`))
}

// notification returns a line of the given flood kind.
func notification(kind string, i int64) []byte {
	switch kind {
	case "message", "notifications/message":
		return concat(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"flood `, strconv.FormatInt(i, 10), `"}}`)
	case "progress", "notifications/progress":
		return concat(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"nobody-asked","progress":`, strconv.FormatInt(i, 10), `}}`)
	default:
		return []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
	}
}

func floodForever(kind string) {
	for i := int64(1); ; i++ {
		writeLine(notification(kind, i))
		flooded.Store(i)
		if i%10000 == 0 {
			fmt.Fprintf(os.Stderr, "hostile flooded %d\n", i)
		}
	}
}

func call(msg message) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil {
		rpcError(msg.ID, -32602, err.Error())
		return
	}
	// Which of the child's own names mcpmux routed the call to.
	fmt.Fprintf(os.Stderr, "hostile call %s\n", p.Name)
	if os.Getenv("HOSTILE_SKIP") == "1" && calls.Add(1)%2 == 0 {
		fmt.Fprintf(os.Stderr, "hostile skipped %s\n", msg.ID)
		return
	}
	var args struct {
		MB     int    `json:"mb"`
		Text   string `json:"text"`
		KB     int    `json:"kb"`
		Method string `json:"method"`
		Count  int64  `json:"count"`
		Add    string `json:"add"`
		Pages  int    `json:"pages"`
		Pad    int    `json:"pad"`
	}
	_ = json.Unmarshal(p.Arguments, &args)
	mb := args.MB // of bigline and bignote
	if mb <= 0 {
		mb = 20
	}
	switch p.Name {
	case "bigline":
		text(msg.ID, strings.Repeat("x", mb<<20))
		bigOnce.Do(func() { close(bigSent) })
	case "held":
		<-bigSent
		text(msg.ID, "held")
	case "bignote":
		writeLine(concat(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`, strings.Repeat("n", mb<<20), `"}}`))
		text(msg.ID, "ok")
	case "noted":
		notedAnswer(msg.ID, args.Text)
	case "flood":
		for i := int64(1); i <= args.Count; i++ {
			if i == args.Count && args.Add != "" {
				added.Store(&args.Add)
			}
			writeLine(notification(args.Method, i))
		}
		text(msg.ID, fmt.Sprintf("flooded %d", args.Count))
	case "grow":
		paging.Store(&pages{n: max(args.Pages, 1), pad: args.Pad})
		text(msg.ID, "grown")
		writeLine(notification("list_changed", 0))
	case "stats":
		text(msg.ID, fmt.Sprintf(`{"tools_list":%d,"flooded":%d}`, listed.Load(), flooded.Load()))
	case "fork_exit":
		forkExit(msg.ID)
	case "rpcerror":
		rpcError(msg.ID, -32602, "child says no")
	case "bigerr":
		long := append(bytes.Repeat([]byte("E"), 200*1024), '\n')
		_, _ = os.Stderr.Write(long)
		var short strings.Builder
		for i := range 1000 {
			fmt.Fprintf(&short, "hostile short line %d\n", i)
		}
		_, _ = os.Stderr.WriteString(short.String())
		text(msg.ID, "ok")
	case "huge":
		huge(msg.ID)
	case "garbage":
		writeLine([]byte("this is not JSON {{{ ]]"))
		text(msg.ID, "ok")
	case "wrongid":
		id := fmt.Sprintf(`"hostile-never-asked-%d"`, wrongIDs.Add(1))
		writeLine(concat(`{"jsonrpc":"2.0","id":`, id, `,"result":{"content":[{"type":"text","text":"for nobody"}]}}`))
		fmt.Fprintf(os.Stderr, "hostile wrongid %s answered as %s\n", msg.ID, id)
	case "twice":
		answerTwice(msg.ID, args.KB)
	case "exit":
		fmt.Fprintf(os.Stderr, "hostile exiting during call %s\n", msg.ID)
		os.Exit(3)
	default:
		args := p.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		text(msg.ID, string(args))
	}
}

// notedAnswer writes a log message of text and the answer text to id in
// one write.
func notedAnswer(id json.RawMessage, text string) {
	t, _ := json.Marshal(text)
	note := concat(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":`, string(t), `}}`, "\n")
	answer := concat(`{"jsonrpc":"2.0","id":`, string(id), `,"result":{"content":[{"type":"text","text":`, string(t), `}]}}`, "\n")
	out.Lock()
	defer out.Unlock()
	_, _ = out.w.Write(append(note, answer...))
}

// answerTwice answers id with "first" and then, in the same write, with kb
// KiB of text.
func answerTwice(id json.RawMessage, kb int) {
	if kb <= 0 {
		kb = 8
	}
	answer := func(s string) []byte {
		return concat(`{"jsonrpc":"2.0","id":`, string(id), `,"result":{"content":[{"type":"text","text":"`, s, `"}]}}`, "\n")
	}
	out.Lock()
	defer out.Unlock()
	_, _ = out.w.Write(append(answer("first"), answer(strings.Repeat("y", kb<<10))...))
	fmt.Fprintf(os.Stderr, "hostile answered %s twice\n", id)
}

// forkExit leaves a grandchild holding stdout, answers, and exits.
func forkExit(id json.RawMessage) {
	cmd := exec.Command("sleep", "1000")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		rpcError(id, -32603, err.Error())
		return
	}
	fmt.Fprintf(os.Stderr, "hostile forked %d and exits\n", cmd.Process.Pid)
	text(id, strconv.Itoa(cmd.Process.Pid))
	out.Lock() // nothing more goes out
	os.Exit(0)
}

// huge starts an answer that never ends. It keeps stdout for good, so that
// nothing else can end the line either.
func huge(id json.RawMessage) {
	mb := 80
	if v, err := strconv.Atoi(os.Getenv("HOSTILE_HUGE_MB")); err == nil && v > 0 {
		mb = v
	}
	out.Lock()
	fmt.Fprintf(os.Stderr, "hostile huge: writing %d MiB without a newline\n", mb)
	_, _ = out.w.Write(concat(`{"jsonrpc":"2.0","id":`, string(id), `,"result":{"content":[{"type":"text","text":"`))
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for i := 0; i < mb; i++ {
		if _, err := out.w.Write(chunk); err != nil {
			fmt.Fprintf(os.Stderr, "hostile huge: stopped after %d MiB: %v\n", i, err)
			break
		}
	}
	fmt.Fprintf(os.Stderr, "hostile huge: done writing\n")
	select {} // never unlocks, never ends the line
}

func text(id json.RawMessage, s string) {
	result(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}})
}

func result(id json.RawMessage, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		rpcError(id, -32603, err.Error())
		return
	}
	writeLine(concat(`{"jsonrpc":"2.0","id":`, string(id), `,"result":`, string(b), `}`))
}

func rpcError(id json.RawMessage, code int, msg string) {
	m, _ := json.Marshal(msg)
	writeLine(concat(`{"jsonrpc":"2.0","id":`, string(id), `,"error":{"code":`, strconv.Itoa(code), `,"message":`, string(m), `}}`))
}

func writeLine(b []byte) {
	out.Lock()
	defer out.Unlock()
	_, _ = out.w.Write(append(b, '\n'))
}

func concat(parts ...string) []byte {
	return []byte(strings.Join(parts, ""))
}
