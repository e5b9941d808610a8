package pipeline

import (
	"encoding/json"
	"errors"

	"github.com/mcpmux/mcpmux/mux/child"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// answer is what the pipeline answers a request with: a result as bytes
// (a JSON object, as the child sent it, URIs rewritten, or one of mcpmux's
// lists), a result of mcpmux's own as a value, or an error. A result is
// decorated for a 2026-07-28 client when it is written (encode).
type answer struct {
	Result json.RawMessage
	Own    mcp.ResultMetadata
	Err    *frame.Error
	// ToolError is set for a child's result (Result) that has isError.
	ToolError bool
}

// isError reports whether a is a result that has isError.
func (a answer) isError() bool {
	if r, ok := a.Own.(*mcp.CallToolResult); ok && r.IsError {
		return true
	}
	return a.Result != nil && a.ToolError
}

// errorAnswer is the answer to a request that failed with err: the
// JSON-RPC error err carries (mcpmux's own or a child's), or -32603 with
// its text.
func errorAnswer(err error) answer {
	var fe *frame.Error
	if errors.As(err, &fe) {
		return answer{Err: fe}
	}
	var ce *child.RPCError
	if errors.As(err, &ce) {
		return answer{Err: &frame.Error{Code: ce.Details.Code, Message: ce.Details.Message, Data: frame.RawData(ce.Details.Data)}}
	}
	return answer{Err: &frame.Error{Code: mcp.INTERNAL_ERROR, Message: err.Error()}}
}

// ownResult is the answer with r, a result of mcpmux's own.
func ownResult(r mcp.ResultMetadata) answer { return answer{Own: r} }

// encode is a's answer line to r.
func (d decorator) encode(r *upstream.Request, a answer) []byte {
	switch {
	case a.Err != nil:
		return frame.ErrorAnswer(r.ID, a.Err)
	case a.Own != nil:
		if r.Modern() {
			d.DecorateOwn(a.Own, r.Method)
		}
		b, err := json.Marshal(a.Own)
		if err != nil {
			return frame.ErrorAnswer(r.ID, &frame.Error{Code: mcp.INTERNAL_ERROR, Message: err.Error()})
		}
		return frame.Result(r.ID, b)
	case r.Modern():
		return frame.Result(r.ID, d.Decorate(a.Result, r.Method))
	}
	return frame.Result(r.ID, a.Result)
}

// decorator decorates the results of 2026-07-28 requests.
type decorator struct{ frame.Decoration }
