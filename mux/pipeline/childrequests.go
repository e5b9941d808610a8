package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/upstream"
)

// errBadChildParams is wrapped by the error for a child's request whose
// params mcpmux cannot read.
var errBadChildParams = errors.New("malformed params")

// ChildParams are the params of a child's request as JSON: an object, or
// nil for none.
func ChildParams(req transport.JSONRPCRequest) (json.RawMessage, error) {
	if req.Params == nil {
		return nil, nil
	}
	raw, err := json.Marshal(req.Params)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadChildParams, err)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		if string(t) == "null" {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: params of %s must be an object", errBadChildParams, req.Method)
	}
	return raw, nil
}

// MissingCapability names the capability the client of the request a
// lacks for a request of method, or returns "". A 2026-07-28 request
// declares its client's capabilities itself; an earlier client declared
// them in initialize.
func MissingCapability(a *upstream.Attachment, method mcp.MCPMethod) string {
	caps := a.Caps()
	switch {
	case method == mcp.MethodSamplingCreateMessage && caps.Sampling == nil:
		return "sampling"
	case method == mcp.MethodElicitationCreate && caps.Elicitation == nil:
		return "elicitation"
	case method == mcp.MethodListRoots && caps.Roots == nil:
		return "roots"
	}
	return ""
}

// RefuseMissing answers req of c, which the client it would go to lacks
// the capability missing for: roots/list with c's [servers.X] roots (the
// client has none of its own, so the configured ones apply), anything else
// with an error naming the capability.
func RefuseMissing(req transport.JSONRPCRequest, c *child.Server, missing string) *transport.JSONRPCResponse {
	if req.Method == string(mcp.MethodListRoots) {
		return ConfiguredRoots(req.ID, c)
	}
	return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND,
		fmt.Sprintf("the client did not declare the %s capability, so mcpmux cannot relay %s to it", missing, req.Method), nil)
}

// ConfiguredRoots answers roots/list from [servers.X] roots.
func ConfiguredRoots(id mcp.RequestId, c *child.Server) *transport.JSONRPCResponse {
	roots := make([]mcp.Root, 0, len(c.Config().Roots))
	for _, r := range c.Config().Roots {
		roots = append(roots, mcp.Root{URI: r})
	}
	raw, _ := json.Marshal(mcp.ListRootsResult{Roots: roots})
	return transport.NewJSONRPCResultResponse(id, raw)
}
