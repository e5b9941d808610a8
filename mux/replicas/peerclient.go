package replicas

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// peerIdleConns is how many idle connections to each peer are kept: one
// per forwarded request in flight at once, up to this many, is reused.
const peerIdleConns = 64

// errDial says a peer could not be connected to: it is gone (or going:
// a replica that drains has closed its listeners).
var errDial = errors.New("the peer cannot be reached")

// errDied says the owner could not be connected to again after a kept
// connection to it failed with the request sent: it may have run it.
var errDied = errors.New("a kept connection failed before the answer began, and the owner cannot be reached")

// errCut says the owner's answer ended before it was whole.
var errCut = errors.New("the owner's answer was cut")

// peerClient sends forwarded requests to the peers over HTTP/1.1
// connections it keeps, one per request in flight, and reads each answer
// on the goroutine that serves the request. net/http's Transport hands
// every request to a writing and a reading goroutine of its connection
// and the answer back: on a forwarded call those hand-offs, each a
// goroutine woken on another thread, were the largest part of the hop's
// CPU in profiles, more than the HTTP itself.
type peerClient struct {
	dialer  net.Dialer
	idleFor time.Duration // an idle connection is used again within this

	mu     sync.Mutex
	idle   map[string][]*peerConn // per peer; the least recently used first
	closed bool
}

type peerConn struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	used time.Time // when it was last put back
}

func newPeerClient(dialTimeout, ownerIdle time.Duration) *peerClient {
	return &peerClient{dialer: net.Dialer{Timeout: dialTimeout}, idleFor: peerIdleTimeout(ownerIdle),
		idle: map[string][]*peerConn{}}
}

// peerIdleTimeout is how long an idle connection to a peer is kept: less
// than the owner's own idle timeout (ownerIdle, limits.idle_timeout, the
// same on every replica), so that the forwarder, not the owner, almost
// always is the one that gives it up.
func peerIdleTimeout(ownerIdle time.Duration) time.Duration {
	if ownerIdle <= 0 {
		return 90 * time.Second
	}
	return ownerIdle * 3 / 4
}

// get returns a kept connection to addr (reused true) or a new one.
func (c *peerClient) get(ctx context.Context, addr string) (*peerConn, bool, error) {
	c.mu.Lock()
	for list := c.idle[addr]; len(list) > 0; list = c.idle[addr] {
		pc := list[len(list)-1]
		c.idle[addr] = list[:len(list)-1]
		if time.Since(pc.used) < c.idleFor {
			c.mu.Unlock()
			// One the owner closed since (it drained, died, or timed
			// it out) is given up before anything is written on it.
			if !pc.closedByPeer() {
				return pc, true, nil
			}
			_ = pc.conn.Close()
			c.mu.Lock()
			continue
		}
		_ = pc.conn.Close()
	}
	c.mu.Unlock()
	pc, err := c.dial(ctx, addr)
	return pc, false, err
}

// dial connects to addr; its error is errDial.
func (c *peerClient) dial(ctx context.Context, addr string) (*peerConn, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDial, err)
	}
	return &peerConn{conn: conn, br: bufio.NewReader(conn), bw: bufio.NewWriter(conn)}, nil
}

// put keeps pc, whose last answer was read whole, for the next request to
// addr; those idle too long are closed.
func (c *peerClient) put(addr string, pc *peerConn) {
	now := time.Now()
	pc.used = now
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.idle[addr]
	for len(list) > 0 && now.Sub(list[0].used) >= c.idleFor {
		_ = list[0].conn.Close()
		list = list[1:]
	}
	if c.closed || len(list) >= peerIdleConns {
		_ = pc.conn.Close()
	} else {
		list = append(list, pc)
	}
	c.idle[addr] = list
}

// close closes the idle connections, and those put back from then on.
func (c *peerClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, list := range c.idle {
		for _, pc := range list {
			_ = pc.conn.Close()
		}
		delete(c.idle, addr)
	}
}

// exchange is one forwarded request: out with body (nil for none) sent to
// addr, its answer's header read. The caller relays the answer and then
// calls done, which keeps the connection for the next request if the
// answer was read whole (the body is not to be closed: done closes the
// connection otherwise). Cancelling ctx cuts the exchange. Its error is
// errDial only when out was sent nowhere.
//
// A kept connection that fails before a byte of the answer arrives is,
// but for one case below, one the owner closed as idle while the request
// was on its way: the owner never read it. It is sent again, once, on a
// new connection. Without that, such a request answered 502 "may or may
// not have taken effect" although it did not (seen in a rolling update).
// The owner makes that race rare (a kept connection closed is found
// before anything is written on it, closedByPeer) and, in a drain,
// harmless: the peer listener stops keeping connections from the first
// signal on (cmd/mcpmux turns its keep-alives off, which closes the idle
// ones at once), while it still accepts new ones.
//
// Why sending it again never runs a request twice. What cannot be told
// apart from the case above is "the owner read the request, ran it, and
// the connection died before the answer began". Every forwarded request
// names what lives in the owner process's memory only (a session, a
// round), and the owner process
//   - died (SIGKILL, a crash): the new connection's dial is refused. The
//     request may have run, so it answers 502, not what forward answers
//     for an owner found gone before anything was sent (served locally:
//     404, after which a client initializes again and sends the call
//     anew, which ran a write twice in the SIGKILL test). A new process
//     listening on the dead one's address within the moment between the
//     failure and the new dial would not know the session or the round
//     either; a replica takes far longer than that to start.
//   - lives on but dropped the connection while serving: its net/http
//     server does that only for a handler that panics before writing,
//     which serveAnswered turns into a 500, an answer.
//   - lives on, and something between the replicas reset the connection:
//     on the peer network (loopback, a pod network) nothing does; a
//     replica's peer listener is never behind a proxy.
//
// A new connection that fails so is not tried again: errors other than
// errDial mean the owner may have run the request.
func (c *peerClient) exchange(ctx context.Context, addr string, out *http.Request, body []byte) (resp *http.Response, done func(), err error) {
	pc, reused, err := c.get(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	for {
		stop := context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(time.Unix(1, 0)) })
		resp, answered, err := pc.roundTrip(out, body)
		if err == nil {
			done := func() {
				if stop() && resp.Body.(*wholeBody).ended && !resp.Close {
					c.put(addr, pc)
					return
				}
				_ = pc.conn.Close()
			}
			return resp, done, nil
		}
		stop()
		_ = pc.conn.Close()
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("forwarding to %s: %w", addr, context.Cause(ctx))
		}
		if !reused || answered {
			return nil, nil, fmt.Errorf("forwarding to %s: %w", addr, err)
		}
		reused = false
		if pc, err = c.dial(ctx, addr); err != nil {
			return nil, nil, fmt.Errorf("forwarding to %s: %w (%v)", addr, errDied, err)
		}
	}
}

// roundTrip writes out and reads its answer's header. answered says a
// byte of the answer had arrived when it failed.
func (pc *peerConn) roundTrip(out *http.Request, body []byte) (*http.Response, bool, error) {
	out.Body, out.ContentLength = nil, 0
	if body != nil {
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	if err := out.Write(pc.bw); err != nil {
		return nil, false, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, false, err
	}
	if _, err := pc.br.Peek(1); err != nil {
		return nil, false, err
	}
	resp, err := http.ReadResponse(pc.br, out)
	if err != nil {
		return nil, true, err
	}
	resp.Body = &wholeBody{ReadCloser: resp.Body}
	return resp, true, nil
}

// wholeBody records whether the body was read to its end: only then is
// its connection at the start of the next answer.
type wholeBody struct {
	io.ReadCloser
	ended bool
}

func (b *wholeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended = true
	}
	return n, err
}

// hopHeaders are a connection's own, never passed on (RFC 9110 7.6.1),
// with Expect: the forwarder has read the body already.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// dropHopHeaders removes from h the hop-by-hop headers and those that h's
// Connection header names.
func dropHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// relay writes resp to w as it arrives: every read of the body is
// flushed, so that an event stream reaches the client event by event.
// writeTimeout, if > 0, bounds each write. It returns errCut (wrapped)
// when the owner's answer ended before it was whole, and the client's
// write error when the client went away.
func relay(w http.ResponseWriter, resp *http.Response, writeTimeout time.Duration) error {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	dropHopHeaders(h)
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if writeTimeout > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if werr := rc.Flush(); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errCut, err)
		}
	}
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
