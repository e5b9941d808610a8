package upstream

import (
	"context"

	"github.com/mcpmux/mcpmux/mux/frame"
)

// Request is one request of a client's that mcpmux answers itself, as
// the front end of its edge read it and the pipeline works on it.
type Request struct {
	Method string
	ID     []byte // as the client wrote it
	Params frame.Params
	Meta   frame.Meta
	// Sess is the upstream session the request came on: the stdio client's,
	// a 2025-11-25 HTTP session, or for a 2026-07-28 request over HTTP,
	// which has none, one of its own.
	Sess *Session
	// Out is how what the request's calls send the client before its
	// answer reaches it.
	Out Out
}

// Modern reports whether r is of protocol 2026-07-28.
func (r *Request) Modern() bool { return r.Meta.Protocol.Modern }

// Attachment is r as its calls reach it.
func (r *Request) Attachment(ctx context.Context) *Attachment {
	return &Attachment{Ctx: ctx, Token: r.Meta.Token, Proto: r.Meta.Protocol, Sess: r.Sess, Out: r.Out}
}
