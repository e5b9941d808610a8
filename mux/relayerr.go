package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// mcp-go answers every error a handler or hook returns with -32603 (or
// -32600) and the error's text. A relayedError carries the JSON-RPC error
// mcpmux means instead (a child's own, or one with the code the protocol
// gives it) in its text, and the edge puts it in place (swapRelayed), as it
// does for results.

// errorKey opens the payload of a relayedError in an error's message.
const errorKey = "io.mcpmux/relay-error:"

var errorNeedle = []byte(errorKey)

// relayedError is a JSON-RPC error to answer with as it is. It unwraps to
// wrapped, for mcpmux's own hooks.
type relayedError struct {
	details mcp.JSONRPCErrorDetails
	wrapped error
}

func (e *relayedError) Error() string {
	payload, err := json.Marshal(e.details)
	if err != nil { // data that does not encode: the message alone
		payload, _ = json.Marshal(mcp.JSONRPCErrorDetails{Code: e.details.Code, Message: e.details.Message})
	}
	return errorKey + string(payload)
}

func (e *relayedError) Unwrap() error { return e.wrapped }

// rpcError is a JSON-RPC error a child answered with. Its text is the
// child's message, as mcp-go's typed error has it; relay makes the error
// to answer a client with.
type rpcError struct {
	details mcp.JSONRPCErrorDetails
	err     error // details.AsError()
}

func (e *rpcError) Error() string { return e.err.Error() }
func (e *rpcError) Unwrap() error { return e.err }

func (e *rpcError) relay() *relayedError { return &relayedError{details: e.details, wrapped: e.err} }

// resourceNotFound is the error for a URI no child owns or the caller may
// not read, the same for both, with the code of the caller's protocol era.
func resourceNotFound(ctx context.Context, uri string) error {
	code := mcp.RESOURCE_NOT_FOUND
	if server.IsModernRequest(ctx) {
		code = mcp.INVALID_PARAMS
	}
	return &relayedError{
		details: mcp.JSONRPCErrorDetails{Code: code, Message: "Resource not found", Data: map[string]any{"uri": uri}},
		wrapped: server.ErrResourceNotFound,
	}
}

// swapError returns msg, one JSON-RPC error response, with its error
// object replaced by the one a relayedError carries in its message, and
// whether it did.
func swapError(msg []byte) ([]byte, bool) {
	top, ok := jsonwire.Members(msg)
	if !ok || top.Last("result") != nil {
		return msg, false
	}
	e := top.Only("error")
	if e == nil {
		return msg, false
	}
	obj, ok := jsonwire.Members(msg[e.Start:e.End])
	if !ok {
		return msg, false
	}
	m := obj.Only("message")
	if m == nil {
		return msg, false
	}
	var text string
	if json.Unmarshal(msg[e.Start+m.Start:e.Start+m.End], &text) != nil {
		return msg, false
	}
	i := strings.Index(text, errorKey)
	if i < 0 {
		return msg, false
	}
	payload := []byte(text[i+len(errorKey):])
	var details mcp.JSONRPCErrorDetails
	if json.Unmarshal(payload, &details) != nil || !json.Valid(payload) {
		return msg, false
	}
	var out bytes.Buffer
	out.Grow(len(msg))
	out.Write(msg[:e.Start])
	if err := json.Compact(&out, payload); err != nil {
		return msg, false
	}
	out.Write(msg[e.End:])
	return out.Bytes(), true
}
