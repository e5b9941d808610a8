package mux

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mcpmux/mcpmux/mux/child"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/frame"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// upRequest is one request of a client's that mcpmux answers itself, as
// the front end read it (frontend.go) and the pipeline works on it
// (pipeline.go).
type upRequest struct {
	method string
	id     []byte // as the client wrote it
	p      frame.Params
	meta   frame.Meta
	// sess is the upstream session the request came on: the stdio client's,
	// a 2025-11-25 HTTP session, or for a 2026-07-28 request over HTTP,
	// which has none, one of its own.
	sess *upstream.Session
	// out is how what the request's calls send the client before its
	// answer reaches it.
	out upstream.Out
}

// modern reports whether r is of protocol 2026-07-28.
func (r *upRequest) modern() bool { return r.meta.Protocol.Modern }

// attachment is r as its calls reach it.
func (r *upRequest) attachment(ctx context.Context) *upstream.Attachment {
	return &upstream.Attachment{Ctx: ctx, Token: r.meta.Token, Proto: r.meta.Protocol, Sess: r.sess, Out: r.out}
}

// answer is what the pipeline answers a request with: a result as bytes
// (a JSON object, as the child sent it, URIs rewritten, or one of mcpmux's
// lists), a result of mcpmux's own as a value, or an error. A result is
// decorated for a 2026-07-28 client when it is written (encode).
type answer struct {
	result json.RawMessage
	own    mcp.ResultMetadata
	err    *frame.Error
}

// errorAnswer is the answer to a request that failed with err: the
// JSON-RPC error err carries (mcpmux's own or a child's), or -32603 with
// its text.
func errorAnswer(err error) answer {
	var fe *frame.Error
	if errors.As(err, &fe) {
		return answer{err: fe}
	}
	var ce *child.RPCError
	if errors.As(err, &ce) {
		return answer{err: &frame.Error{Code: ce.Details.Code, Message: ce.Details.Message, Data: frame.RawData(ce.Details.Data)}}
	}
	return answer{err: &frame.Error{Code: mcp.INTERNAL_ERROR, Message: err.Error()}}
}

// ownResult is the answer with r, a result of mcpmux's own.
func ownResult(r mcp.ResultMetadata) answer { return answer{own: r} }

// encode is a's answer line to r.
func (d decorator) encode(r *upRequest, a answer) []byte {
	switch {
	case a.err != nil:
		return frame.ErrorAnswer(r.id, a.err)
	case a.own != nil:
		if r.modern() {
			d.DecorateOwn(a.own, r.method)
		}
		b, err := json.Marshal(a.own)
		if err != nil {
			return frame.ErrorAnswer(r.id, &frame.Error{Code: mcp.INTERNAL_ERROR, Message: err.Error()})
		}
		return frame.Result(r.id, b)
	case r.modern():
		return frame.Result(r.id, d.Decorate(a.result, r.method))
	}
	return frame.Result(r.id, a.result)
}

// decorator decorates the results of 2026-07-28 requests.
type decorator struct{ frame.Decoration }

// decoration names mcpmux in every 2026-07-28 result, as newServer names
// it to mcp-go.
var decoration = decorator{frame.Decoration{Server: mcp.Implementation{Name: "mcpmux", Version: Version}}}
