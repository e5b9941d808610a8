package upstream

import "context"

// What an edge tells mcp-go's handshake hooks through the context of a
// request it hands mcp-go: the hooks run inside mcp-go, which passes them
// nothing else of the edge's.

// AnswerWatch is an edge that can run something as it writes the answer
// under an id (canonical, jsonwire.IDKey), so that what it lets through
// reaches the client after the answer: the stdio edge just before the
// write, holding its writer; the HTTP edge just after it.
type AnswerWatch interface {
	AfterAnswer(id string, f func())
}

type answerWatchKey struct{}

// WithAnswerWatch returns ctx for the requests of the edge w.
func WithAnswerWatch(ctx context.Context, w AnswerWatch) context.Context {
	return context.WithValue(ctx, answerWatchKey{}, w)
}

// AnswerWatchFrom returns the edge a request's ctx names, if any.
func AnswerWatchFrom(ctx context.Context) (AnswerWatch, bool) {
	w, ok := ctx.Value(answerWatchKey{}).(AnswerWatch)
	return w, ok
}

type viaHTTPKey struct{}

// WithViaHTTP marks ctx as a request's served over HTTP.
func WithViaHTTP(ctx context.Context) context.Context {
	return context.WithValue(ctx, viaHTTPKey{}, true)
}

// ViaHTTP reports whether ctx is a request's served over HTTP.
func ViaHTTP(ctx context.Context) bool {
	v, _ := ctx.Value(viaHTTPKey{}).(bool)
	return v
}
