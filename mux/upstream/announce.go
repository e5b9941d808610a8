package upstream

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// mcp-go announces every change of its registered tools, prompts and
// resources to every session. mcpmux registers names only so that mcp-go's
// dispatch reaches it, and tells each session itself, only when the lists
// that session sees changed (notify); so at the edge mcp-go's announcements
// are dropped and mcpmux's own, which carry OwnMark, pass without it.

var listChangedNeedle = []byte(`/list_changed"`)

// taskStatusNeedle finds notifications/tasks/status, which mcp-go sends to
// every session and mcpmux only to the task's (the root's tasks.go), the same way.
var taskStatusNeedle = []byte(`"` + mcp.MethodNotificationTasksStatus + `"`)

// Announcement handles msg if it is a list_changed notification: one of
// mcpmux's is returned without its mark, one of mcp-go's as nothing. ok is
// false for any other message, which the caller leaves as it is.
func Announcement(msg []byte) (out []byte, ok bool) {
	if !bytes.Contains(msg, listChangedNeedle) && !bytes.Contains(msg, taskStatusNeedle) || !json.Valid(msg) {
		return msg, false
	}
	top, ok := jsonwire.Members(msg)
	if !ok || top.Only("id") != nil {
		return msg, false
	}
	method := top.Only("method")
	var name string
	if method == nil || json.Unmarshal(msg[method.Start:method.End], &name) != nil ||
		!strings.HasPrefix(name, "notifications/") || !strings.HasSuffix(name, "/list_changed") && name != mcp.MethodNotificationTasksStatus {
		return msg, false
	}
	params := top.Only("params")
	if params == nil || !bytes.Contains(msg[params.Start:params.End], []byte(`"`+OwnMark+`"`)) {
		return nil, true
	}
	rest, err := jsonwire.WithoutField(msg[params.Start:params.End], OwnMark)
	if err != nil {
		return nil, true
	}
	out = make([]byte, 0, len(msg))
	out = append(out, msg[:params.Start]...)
	out = append(out, rest...)
	return append(out, msg[params.End:]...), true
}

// SSEData opens the data field of the one event mcp-go writes per Write
// ("event: message\ndata: <message>\n\n", after an "id:" line with an
// event store).
var SSEData = []byte("\ndata: ")

// FramedAnnouncement is Announcement for one Write of mcp-go's streamable
// HTTP transport: a JSON body (json.Encoder: the message and a newline) or
// one server-sent event whose data is one line. An announcement of
// mcp-go's comes back as nothing, not even an empty event.
func FramedAnnouncement(b []byte) ([]byte, bool) {
	if !bytes.Contains(b, listChangedNeedle) && !bytes.Contains(b, taskStatusNeedle) {
		return b, false
	}
	if first := bytes.TrimLeft(b, " \t\r\n"); len(first) > 0 && first[0] == '{' {
		out, ok := Announcement(bytes.TrimRight(b, " \t\r\n"))
		if ok && len(out) > 0 {
			out = append(out, '\n')
		}
		return out, ok
	}
	var start int
	if bytes.HasPrefix(b, SSEData[1:]) {
		start = len(SSEData) - 1
	} else if i := bytes.Index(b, SSEData); i >= 0 {
		start = i + len(SSEData)
	} else {
		return b, false
	}
	end := bytes.IndexByte(b[start:], '\n')
	if end < 0 {
		end = len(b)
	} else {
		end += start
	}
	swapped, ok := Announcement(b[start:end])
	if !ok {
		return b, false
	}
	if len(swapped) == 0 {
		return nil, true
	}
	out := make([]byte, 0, start+len(swapped)+len(b)-end)
	out = append(out, b[:start]...)
	out = append(out, swapped...)
	return append(out, b[end:]...), true
}
