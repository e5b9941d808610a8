package link

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotSent marks a request to a remote child that failed before any of it
// was written: whatever it asked, the server never saw it.
var ErrNotSent = errors.New("the request was never sent")

// notSent marks err with ErrNotSent when net/http says so. net/http fails a
// request with "server closed idle connection" only when the server closed
// the connection before the request was handed to it, and does not retry a
// POST itself; the error is not exported, so only its text tells.
func notSent(err error) error {
	if strings.Contains(err.Error(), "http: server closed idle connection") {
		return fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	return err
}

// withStaleCheck makes req drop a kept-alive connection that its server has
// already closed, before a byte of req is written to it.
//
// net/http notices a server's close of an idle connection on a goroutine of
// its own; a request that picks the connection before that goroutine has run
// is written to a dead peer and fails with EOF, which for a POST net/http
// cannot tell from a server that read the request and died. Closing such a
// connection up front turns that into a failure with nothing written, which
// net/http retries on a new connection (the body of an MCP POST can be
// replayed), so a write sent after its server went away fails as never sent
// rather than as maybe run.
func withStaleCheck(req *http.Request) *http.Request {
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused && peerClosed(info.Conn) {
				info.Conn.Close()
			}
		},
	}))
}

// peerClosed reports whether the other end of an idle connection has closed
// it or reset it, or has sent what nobody asked for; it never blocks and
// consumes nothing. A connection it cannot look into is taken as open.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false // TLS: net/http's own checks stand
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	// Control, not Read: the connection's read side belongs to net/http's
	// read loop, parked on it.
	err = raw.Control(func(fd uintptr) {
		n, _, rerr := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		closed = !errors.Is(rerr, unix.EAGAIN) || n > 0
	})
	return err == nil && closed
}
