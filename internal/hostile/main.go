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
//	exit     exits with status 3 without answering
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

var wrongIDs atomic.Int64

func main() {
	out.w = os.Stdout
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
		tools := []byte(`[{"name":"echo","inputSchema":{"type":"object"}}]`)
		if path := os.Getenv("HOSTILE_TOOLS"); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				rpcError(msg.ID, -32603, err.Error())
				return
			}
			tools = bytes.TrimSpace(b)
		}
		// Verbatim: whatever the file holds is what mcpmux gets.
		writeLine(concat(`{"jsonrpc":"2.0","id":`, string(msg.ID), `,"result":{"tools":`, string(tools), `}}`))
	case "tools/call":
		call(msg)
	default:
		rpcError(msg.ID, -32601, "method not found: "+msg.Method)
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
	switch p.Name {
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
