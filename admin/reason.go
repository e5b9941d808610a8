package admin

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"
)

// httpStatus finds the status code mcp-go's client puts before a remote
// server's body ("request failed with status 502: ..."); only the code is
// kept.
var httpStatus = regexp.MustCompile(`status ([1-5])[0-9][0-9]\b`)

// notReadyWithin is mux's own wording for a start-up that ran out of time.
var notReadyWithin = regexp.MustCompile(`no answer within ([0-9a-zµ.]+)`)

// Reason classifies a child's last error in a few fixed words, for /readyz:
// an operator learns what kind of failure it is, and nothing of what a
// remote server or a child wrote ever reaches whoever can ask (the full
// error is in mcpmux's log). The classes are "exited", "start failed",
// "not ready within <startup_timeout>", "connection refused", "connection
// reset", "dns lookup failed", "http 401", "http 4xx", "http 5xx",
// "connection lost", "pings failed", "protocol broken", "message too
// large", "initialize failed", "tools/list failed", "timed out" and, for
// anything else, "error".
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.As(err, &dns):
		return "dns lookup failed"
	case errors.Is(err, transport.ErrUnauthorized):
		return "http 401"
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return "start failed"
	}
	// mux's own wordings, most specific first: each phrase is written by
	// mcpmux, whatever text follows it.
	msg := err.Error()
	switch {
	case strings.Contains(msg, "restarting after it exited"),
		strings.Contains(msg, "process exit status"), strings.Contains(msg, "process signal:"):
		return "exited"
	case strings.Contains(msg, "over max_message_bytes"):
		return "message too large"
	case strings.Contains(msg, "stdout ended or broke the protocol"):
		return "protocol broken"
	case strings.Contains(msg, "pings in a row failed"):
		return "pings failed"
	}
	if m := notReadyWithin.FindStringSubmatch(msg); m != nil {
		return "not ready within " + m[1]
	}
	if m := httpStatus.FindStringSubmatch(msg); m != nil {
		return "http " + m[1] + "xx"
	}
	switch {
	case strings.Contains(msg, "connection lost"):
		return "connection lost"
	case strings.Contains(msg, ": start "), strings.Contains(msg, ": start:"):
		return "start failed"
	case strings.Contains(msg, ": initialize:"):
		return "initialize failed"
	case strings.Contains(msg, ": tools/list:"):
		return "tools/list failed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	}
	return "error"
}
