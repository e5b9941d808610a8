package child

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/childproc"
)

// testHost runs children for the tests of this package: it starts their
// processes through a real supervisor and has no clients, so that what a
// child sends outside an answer reaches no one and a child's request is
// refused.
type testHost struct{ spawner *childproc.Spawner }

// newTestHost returns a testHost whose supervisor is stopped when t ends.
func newTestHost(t testing.TB) testHost {
	sp := childproc.NewSpawner("")
	t.Cleanup(sp.Close)
	return testHost{spawner: sp}
}

func (testHost) Published(*Server, *State, *State) {}
func (testHost) Restarted(*Server)                 {}
func (testHost) CatalogRead()                      {}
func (h testHost) Spawn(ctx context.Context, spec childproc.Spec) (*childproc.Process, error) {
	return h.spawner.Start(ctx, spec)
}
func (testHost) SubscribedURIs(string) []string { return nil }
func (testHost) Request(_ context.Context, _ *Server, _ *Session, req transport.JSONRPCRequest) *transport.JSONRPCResponse {
	return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "these tests have no client to ask", nil)
}
func (testHost) ResourceUpdated(*Server, mcp.JSONRPCNotification) {}
func (testHost) Progress(*Session, mcp.JSONRPCNotification)       {}
func (testHost) Log(*Server, *Session, mcp.JSONRPCNotification)   {}
func (testHost) ApplyLogLevel(context.Context, *Server, *Session) {}
