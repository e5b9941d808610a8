package mux

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
)

// ErrShuttingDown is the cause given to calls cut off because mcpmux is
// stopping; their callers are told so.
var ErrShuttingDown = errors.New("mcpmux is shutting down")

// HTTPOptions configure the streamable HTTP upstream.
type HTTPOptions struct {
	// Path is where MCP is served.
	Path string
	// SessionIdleTimeout drops sessions idle this long; a client that comes
	// back initializes again.
	SessionIdleTimeout time.Duration
}

// HTTPUpstream serves MCP over streamable HTTP. Each request must carry its
// caller's identity in its context (WithIdentity), put there by whatever
// authenticated it.
type HTTPUpstream struct {
	srv *server.StreamableHTTPServer
}

// NewHTTPUpstream builds the streamable HTTP upstream on the mux's server.
// DNS-rebinding protection (Host checks on loopback) stays on.
func (m *Mux) NewHTTPUpstream(o HTTPOptions) *HTTPUpstream {
	return &HTTPUpstream{srv: server.NewStreamableHTTPServer(m.srv,
		server.WithEndpointPath(o.Path),
		server.WithStateful(true),
		server.WithSessionIdleTTL(o.SessionIdleTimeout),
		server.WithStreamableHTTPLogger(slog.New(zerolog.NewSlogHandler(m.log.With().Str("component", "http").Logger()))),
	)}
}

// ServeHTTP serves one MCP request.
func (h *HTTPUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.srv.ServeHTTP(w, r)
}

// Shutdown ends every client's listening stream, so that an HTTP server
// shutting down is not held up by them, and stops the idle-session sweeper.
func (h *HTTPUpstream) Shutdown(ctx context.Context) {
	_ = h.srv.Shutdown(ctx) // it owns no http.Server here, so only sessions close
}
