package upstream

import (
	"context"
	"encoding/json"
	"errors"
)

// Out is an edge's side of one request: what mcpmux sends the
// client while the request runs, before its answer. Both are safe to call
// from any goroutine.
type Out interface {
	// Notify writes one notification, a JSON-RPC line, at once.
	Notify(line []byte)
	// Ask sends the client a request of method with params (a JSON
	// object, nil for none) and returns the result it answers with; an
	// error answer is a *frame.Error. It ends with ctx.
	Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// ErrNoAsk is what ask returns where the request's edge cannot carry a
// request to the client.
var ErrNoAsk = errors.New("the client cannot be asked on this request's stream")

// streamOut carries what mcpmux sends an HTTP session down its open GET
// streams.
type streamOut struct{ u *Session }

func (s streamOut) Notify(line []byte) { _, _ = s.u.Offer(Note{Raw: line}) }

func (s streamOut) Ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	return s.u.Asks.Ask(ctx, func(line []byte) error {
		taken, err := s.u.Offer(Note{Raw: line})
		if !taken {
			return ErrNoAsk
		}
		return err
	}, method, params)
}
