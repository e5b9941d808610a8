package upstream

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
)

// Attachment is an upstream request as what its calls send reaches it.
type Attachment struct {
	// Ctx is the request's: its end, and its caller (WithCaller).
	Ctx context.Context
	// Token is the client's progress token, as it wrote it; nil when it
	// asked for none.
	Token json.RawMessage
	Proto frame.Protocol
	Sess  *Session
	// Out is the request's edge; nil for a task, which outlives the
	// request that began it: what it sends goes to its session.
	Out Out
}

// Caps are the client capabilities that count for a request to the client
// during a: a 2026-07-28 request's own, or those its session declared in
// initialize.
func (a *Attachment) Caps() mcp.ClientCapabilities {
	if a.Proto.Modern {
		if a.Proto.Caps != nil {
			return *a.Proto.Caps
		}
		return mcp.ClientCapabilities{}
	}
	if a.Sess != nil {
		return a.Sess.ClientCaps()
	}
	return mcp.ClientCapabilities{}
}
