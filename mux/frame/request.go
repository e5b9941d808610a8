package frame

import (
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/mux/jsonwire"
)

// Params are the params of a request mcpmux answers itself, as it reads
// them: the members of every such request's, each set only when the
// request has it. Byte fields are slices of the message.
type Params struct {
	// Name is a tools/call's or prompts/get's.
	Name string
	// URI is a resources/read's, resources/subscribe's or
	// resources/unsubscribe's.
	URI string
	// Cursor is a list's.
	Cursor string
	// Arguments is a tools/call's or prompts/get's, as written; nil when
	// absent or null.
	Arguments []byte
	// Meta is the _meta as written (an object); nil when absent or null.
	Meta []byte
	// Task is a task-augmented tools/call's task (an object); nil for a
	// plain call.
	Task []byte
	// RequestState and InputResponses are those of a 2026-07-28 client's
	// retry of a request that was answered with an input-required result.
	RequestState   string
	InputResponses []byte
	// Ref, Argument and Context are a completion/complete's, as written.
	Ref, Argument, Context []byte
}

// paramType says what JSON a member of params must be.
type paramType uint8

const (
	anyValue paramType = iota
	stringValueType
	objectValue
)

// paramMembers are the members of params mcpmux reads, and what each must
// be.
var paramMembers = map[string]paramType{
	"name": stringValueType, "uri": stringValueType, "cursor": stringValueType, "requestState": stringValueType,
	"arguments": anyValue, "_meta": objectValue, "task": objectValue, "inputResponses": objectValue,
	"ref": objectValue, "argument": objectValue, "context": objectValue,
}

// ReadParams reads params (nil for none), the params of a request of
// method mcpmux answers itself. Its error is the JSON-RPC error to answer
// with: -32602 for params that are not an object, a member of the wrong
// type, a member spelt in another case or given twice. With an error, p
// still holds _meta when it is an object: the transport's checks, which
// come before the params', read the protocol it declares.
func ReadParams(method string, params []byte) (Params, *Error) {
	var p Params
	if params == nil {
		return p, nil
	}
	obj, ok := jsonwire.Members(params)
	fail := func(e *Error) (Params, *Error) {
		if m := obj.Only("_meta"); m != nil && params[m.Start] == '{' {
			p.Meta = params[m.Start:m.End]
		}
		return p, e
	}
	if !ok {
		return fail(Errorf(mcp.INVALID_PARAMS, "invalid params of %s: they must be a JSON object", method))
	}
	for i := range obj.Members {
		m := &obj.Members[i]
		want, known := paramMembers[m.Key]
		if !known {
			for k := range paramMembers {
				if strings.EqualFold(m.Key, k) {
					return fail(Errorf(mcp.INVALID_PARAMS, "invalid params of %s: the member %s is %s in another case", method, quote(m.Key), quote(k)))
				}
			}
			continue
		}
		if obj.Only(m.Key) == nil {
			return fail(Errorf(mcp.INVALID_PARAMS, "invalid params of %s: the member %s is given twice", method, quote(m.Key)))
		}
		v := params[m.Start:m.End]
		if string(v) == "null" {
			continue // as absent
		}
		var s string
		switch want {
		case stringValueType:
			if s, ok = stringValue(v); !ok {
				return fail(Errorf(mcp.INVALID_PARAMS, "invalid params of %s: %s must be a string", method, m.Key))
			}
		case objectValue:
			if v[0] != '{' {
				return fail(Errorf(mcp.INVALID_PARAMS, "invalid params of %s: %s must be a JSON object", method, m.Key))
			}
		}
		switch m.Key {
		case "name":
			p.Name = s
		case "uri":
			p.URI = s
		case "cursor":
			p.Cursor = s
		case "requestState":
			p.RequestState = s
		case "arguments":
			p.Arguments = v
		case "_meta":
			p.Meta = v
		case "task":
			p.Task = v
		case "inputResponses":
			p.InputResponses = v
		case "ref":
			p.Ref = v
		case "argument":
			p.Argument = v
		case "context":
			p.Context = v
		}
	}
	return p, nil
}
