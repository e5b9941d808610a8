package pipeline

import (
	"time"

	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/policy"
)

// Observer is told what the mux does, for metrics. Its methods run on the
// call path and on supervisors' goroutines: they must be quick and must not
// block.
type Observer interface {
	// CallStarted and CallFinished bracket a call that was allowed and is
	// being forwarded to server: from when it has one of the server's
	// max_in_flight slots (a call still queued for one is not in flight).
	CallStarted(server string)
	CallFinished(server string)
	// CallDone reports every call, allowed or not, once, when it ends.
	CallDone(CallRecord)
	// ChildPhase reports a child entering a phase.
	ChildPhase(alias string, phase child.Phase)
	// ChildRestarted reports a child process or session that went away and
	// is being started again.
	ChildRestarted(alias string)
	// Session reports an upstream session opening (+1) or closing (-1).
	Session(identity string, delta int)
	// Operation reports a request mcpmux answered, or one it sent a
	// child, when it ends.
	Operation(Operation)
}

// Operation is one request, as mcp.server.operation.duration (an upstream
// request mcpmux answered) and mcp.client.operation.duration (a request
// to a child) count it.
type Operation struct {
	Client bool
	Method string
	// Server is the child's alias, for a request to a child.
	Server string
	// ErrorType is error.type: "" for success, "tool_error" for a result
	// with isError, or the JSON-RPC error code; it is one of a bounded set.
	ErrorType string
	Took      time.Duration
}

// CallRecord is one call as the audit log sees it, with its timings.
type CallRecord struct {
	Identity string
	// Tool is the exposed name; "" when the name was not in the catalog,
	// so that raw input never becomes a metric label.
	Tool     string
	Server   string
	Decision Decision
	Rule     *policy.Rule // the rule that refused, when Decision is rule
	Outcome  Outcome
	Total    time.Duration // from the call's arrival to its answer
	Child    time.Duration // spent waiting on the child, retries included
}

type NopObserver struct{}

func (NopObserver) CallStarted(string)             {}
func (NopObserver) CallFinished(string)            {}
func (NopObserver) CallDone(CallRecord)            {}
func (NopObserver) ChildPhase(string, child.Phase) {}
func (NopObserver) ChildRestarted(string)          {}
func (NopObserver) Session(string, int)            {}
func (NopObserver) Operation(Operation)            {}
