//go:build !unix

package replicas

// closedByPeer cannot tell here: a closed connection is found when the
// request written on it gets no answer.
func (pc *peerConn) closedByPeer() bool { return pc.br.Buffered() > 0 }
