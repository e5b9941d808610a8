package link

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os/exec"
	"regexp"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// FailureReason is the kind of a child's failure in a few fixed words, for
// status output: it tells an operator what went wrong and never carries what
// a child or a remote server wrote.
type FailureReason string

// The kinds of failure. A start-up that ran out of time is NotReadyWithin its
// startup timeout.
const (
	ReasonExited            FailureReason = "exited"
	ReasonStartFailed       FailureReason = "start failed"
	ReasonConnectionRefused FailureReason = "connection refused"
	ReasonConnectionReset   FailureReason = "connection reset"
	ReasonDNS               FailureReason = "dns lookup failed"
	ReasonHTTP3xx           FailureReason = "http 3xx" // a redirect, never followed
	ReasonHTTP401           FailureReason = "http 401"
	ReasonHTTP4xx           FailureReason = "http 4xx"
	ReasonHTTP5xx           FailureReason = "http 5xx"
	ReasonConnectionLost    FailureReason = "connection lost"
	ReasonPingsFailed       FailureReason = "pings failed"
	ReasonProtocolBroken    FailureReason = "protocol broken"
	ReasonMessageTooLarge   FailureReason = "message too large"
	ReasonInitializeFailed  FailureReason = "initialize failed"
	ReasonToolsListFailed   FailureReason = "tools/list failed"
	ReasonTimedOut          FailureReason = "timed out"
	ReasonError             FailureReason = "error"
)

// NotReadyWithin is the reason of a start-up that got no answer within the
// startup timeout d.
func NotReadyWithin(d time.Duration) FailureReason {
	return FailureReason("not ready within " + d.String())
}

// childError is a child's failure as mux words it, with its reason decided
// where it happened. Its text is err's.
type childError struct {
	reason FailureReason
	err    error
}

func (e *childError) Error() string { return e.err.Error() }
func (e *childError) Unwrap() error { return e.err }

// Failure gives err the reason r.
func Failure(r FailureReason, err error) error {
	return &childError{reason: r, err: err}
}

// StepFailure gives err, the failure of a start-up step, the reason its
// cause shows, or when that shows nothing, the step's own (start failed,
// initialize failed, tools/list failed).
func StepFailure(step FailureReason, err error) error {
	r := ReasonOf(err)
	if r == ReasonError {
		r = step
	}
	return Failure(r, err)
}

// LostReason is the reason of a session lost to err from its transport.
func LostReason(err error) FailureReason {
	if r := ReasonOf(err); r != ReasonError {
		return r
	}
	return ReasonConnectionLost
}

// httpStatus finds the status code mcp-go's client puts before a remote
// server's body ("request failed with status 502: ..."), its only way of
// telling it; only the code is kept.
var httpStatus = regexp.MustCompile(`status ([45])[0-9][0-9]\b`)

// ReasonOf classifies err, a child's failure such as ChildStatus.LastErr:
// by the reason mux gave it where it happened, and for errors from the
// network, the system or mcp-go's client by what they are. It is "" for
// nil and ReasonError for anything it cannot tell.
func ReasonOf(err error) FailureReason {
	if err == nil {
		return ""
	}
	var dns *net.DNSError
	var ce *childError
	if hs, ok := errors.AsType[*HTTPStatusError](err); ok {
		switch {
		case hs.Code == 401:
			return ReasonHTTP401
		case hs.Code >= 500:
			return ReasonHTTP5xx
		case hs.Code >= 400:
			return ReasonHTTP4xx
		case hs.Redirect:
			return ReasonHTTP3xx
		}
		return ReasonError
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonConnectionRefused
	case errors.Is(err, syscall.ECONNRESET):
		return ReasonConnectionReset
	case errors.As(err, &dns):
		return ReasonDNS
	case errors.Is(err, transport.ErrUnauthorized), errors.Is(err, transport.ErrAuthorizationRequired),
		errors.Is(err, transport.ErrOAuthAuthorizationRequired):
		return ReasonHTTP401
	case errors.Is(err, transport.ErrLegacySSEServer): // a 4xx to initialize
		return ReasonHTTP4xx
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return ReasonStartFailed
	case errors.As(err, &ce):
		return ce.reason
	}
	if m := httpStatus.FindStringSubmatch(err.Error()); m != nil {
		if m[1] == "4" {
			return ReasonHTTP4xx
		}
		return ReasonHTTP5xx
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ReasonTimedOut
	}
	return ReasonError
}
