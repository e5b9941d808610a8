//go:build unix

package replicas

import (
	"errors"
	"syscall"
)

// closedByPeer reports whether the owner has closed pc (its FIN or reset
// has arrived) or sent on it unasked, without blocking: one non-blocking
// peek at the socket.
func (pc *peerConn) closedByPeer() bool {
	if pc.br.Buffered() > 0 {
		return true
	}
	sc, ok := pc.conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = !errors.Is(err, syscall.EAGAIN) || n > 0
		return true
	})
	return closed || err != nil
}
