package tasks

import (
	"encoding/json"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/searchmode"
)

// Route says whether a 2025-11-25 client's task-augmented tools/call of
// name with arguments args goes to mcp-go's task store, and as which call.
// It does for a tool of cat that may run as a task, called directly; and
// for own's call_tool called by a caller in search mode (searching), when
// the tool it names is one: the call is then that tool's, with the
// arguments call_tool was given for it (nil when it was given none), so
// that mcp-go, Handle and the pipeline see the direct call it stands for,
// and the task is the tool's in every step: mcp-go refuses a tool the
// caller may not call as unknown (relay's tool filter) exactly as it
// refuses a direct call of it, and the task's status, result, cancellation
// and audit line are the tool's.
//
// ok is false for any other call, which mcpmux answers itself as it
// answers the same call without a task: a tool that does not run as a task
// runs as a plain call, as mcp-go would run it; a name no server has is
// refused as unknown; a call_tool whose arguments name no tool is refused
// by the pipeline, as without a task.
func Route(cat *catalog.Catalog, own *searchmode.Tools, searching func() bool, name string, args []byte) (tool string, toolArgs []byte, ok bool) {
	tool, toolArgs = name, args
	if name == own.Call && searching() {
		target, err := own.ParseTarget(args)
		if err != nil {
			return "", nil, false
		}
		tool, toolArgs = target.Name, target.Arguments
	}
	if e, known := cat.Lookup(catalog.KindTool, tool); !known || e.Task == "" {
		return "", nil, false
	}
	return tool, toolArgs, true
}

// DirectCall is msg, a task-augmented tools/call of call_tool that Route
// sent on as a call of tool with args (nil: none), as that direct call:
// its params' name and arguments replaced, every other byte (its id, the
// task, the _meta with a progress token) as the client wrote it. Its error
// is for a msg that is not a JSON-RPC request with params, which the edge
// has already read it to be.
func DirectCall(msg []byte, tool string, args []byte) ([]byte, error) {
	top, ok := jsonwire.Members(msg)
	at := top.Only("params")
	if !ok || at == nil {
		return nil, jsonwire.ErrNotObject
	}
	name, err := json.Marshal(tool)
	if err != nil {
		return nil, err
	}
	params, err := jsonwire.WithField(msg[at.Start:at.End], "name", name)
	if err == nil && args == nil {
		params, err = jsonwire.WithoutField(params, "arguments")
	} else if err == nil {
		params, err = jsonwire.WithField(params, "arguments", args)
	}
	if err != nil {
		return nil, err
	}
	return jsonwire.WithValue(msg, *at, params), nil
}
