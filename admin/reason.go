package admin

import "github.com/mcpmux/mcpmux/mux/child/link"

// Reason classifies a child's last error in a few fixed words, for /readyz:
// an operator learns what kind of failure it is, and nothing of what a
// remote server or a child wrote ever reaches whoever can ask (the full
// error is in mcpmux's log). The classes are mux's FailureReasons:
// "exited", "start failed", "not ready within <startup_timeout>",
// "connection refused", "connection reset", "dns lookup failed", "http
// 3xx" (a redirect, which mcpmux does not follow), "http 401", "http 4xx",
// "http 5xx", "connection lost", "pings failed",
// "protocol broken", "message too large", "initialize failed", "tools/list
// failed", "timed out" and, for anything else, "error".
func Reason(err error) string {
	return string(link.ReasonOf(err))
}
