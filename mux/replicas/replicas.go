// Package replicas owns what makes several mcpmux replicas behind one load
// balancer answer any request, with no stickiness: the ids a replica hands
// out for what lives only with it (a 2025-11-25 session, a 2026-07-28
// round's requestState, a task) are sealed (package seal) to name it as
// their owner, and a replica that receives a request naming another's forwards
// it to that owner's peer listener, relaying the answer, event streams
// included. The owner serves a forwarded request as one of its own and
// never forwards it again: a request takes at most one extra hop. An id no
// replica can open, or whose owner is gone, is served locally, where it
// names nothing: a session's request gets 404 (the client initializes
// again), a round's retry "requestState is unknown or expired". A task's
// requests come with its session; a task id of another replica's, asked
// in a new session, is answered by package tasks, which asks TaskIDs.Gone.
package replicas

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/jsonwire"
	"github.com/mcpmux/mcpmux/mux/seal"
)

// The purposes ids are sealed for: one never opens as another.
const (
	purposeSession = "session"
	purposeState   = "requestState"
)

// sessionPrefix is what every session id starts with (mcp-go's, kept by
// the session registry); the sealed part follows it.
const sessionPrefix = "mcp-session-"

// Node is this replica among its peers.
type Node struct {
	ring    *seal.Ring
	keyFile string
	self    string // this replica's advertised peer address: the owner its ids name
	boot    string // this process's random id: a restarted replica's differs
	dial    time.Duration
	peers   *peers
	log     zerolog.Logger

	client *peerClient // to the peers

	writeTimeout time.Duration // each write of a relayed answer, within

	maxBody     int64         // a body read to find its requestState, at most
	readTimeout time.Duration // and within
}

// New reads the key file of r and returns this replica's node. limits
// bound the body New's handlers read.
func New(r config.Replicas, limits config.Limits, log zerolog.Logger) (*Node, error) {
	keys, err := seal.ReadKeys(r.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("[replicas] key_file: %w", err)
	}
	log = log.With().Str("component", "replicas").Logger()
	n := &Node{ring: seal.NewRing(keys), keyFile: r.KeyFile, self: r.Advertise, boot: rand.Text(), dial: r.DialTimeout, log: log,
		maxBody: min(limits.MaxBodyBytes, limits.MaxMessageBytes), readTimeout: limits.ReadTimeout,
		writeTimeout: limits.WriteTimeout}
	if r.PeersDNS != "" {
		_, port, _ := net.SplitHostPort(r.Listen)
		n.peers = dnsPeers(r.PeersDNS, port, r.DialTimeout)
	} else {
		n.peers = staticPeers(r.Peers)
	}
	// HTTP/1.1 with keep-alive to the peers (peerClient): a forwarded
	// request costs no dial. HTTP/2 without TLS, one connection per peer,
	// cost more per call (1.79-1.93x direct against 1.67-1.73x for
	// net/http's HTTP/1 Transport, BenchmarkForwardedCall).
	n.client = newPeerClient(r.DialTimeout, limits.IdleTimeout)
	return n, nil
}

// Self is this replica's advertised peer address.
func (n *Node) Self() string { return n.self }

// Keys names the keys in force, for the log.
func (n *Node) Keys() []string { return n.ring.Fingerprints() }

// SealSessionID is the session id handed out for local: sealed to name
// this replica.
func (n *Node) SealSessionID(local string) string { return n.ring.Seal(purposeSession, n.self, local) }

// SealRequestState is the requestState handed out for local.
func (n *Node) SealRequestState(local string) string { return n.ring.Seal(purposeState, n.self, local) }

// Run keeps the keys those of the key file and, with peers_dns, the peers
// those the name resolves to, until ctx is done; it returns once both have
// stopped. watching, if not nil, is called once the key file is watched.
func (n *Node) Run(ctx context.Context, watching func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := n.ring.Watch(ctx, n.keyFile, n.log, watching); err != nil {
			n.log.Error().Err(err).Msg("replica key watcher stopped")
		}
	})
	wg.Go(func() {
		n.peers.run(ctx, func(err error) { n.log.Warn().Err(err).Msg("peers not looked up; the last found stay") })
	})
	wg.Wait()
	n.client.close()
}

// Public wraps next, the MCP endpoint of the public listener, so that a
// request whose session or requestState another replica owns goes to it.
func (n *Node) Public(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, r, ok := n.ownerOf(w, r)
		if !ok {
			return
		}
		if owner == "" || owner == n.self {
			next.ServeHTTP(w, r)
			return
		}
		if !n.peers.has(r.Context(), owner) {
			n.log.Info().Str("owner", owner).Msg("the request's owner is not among the peers: served as one that names nothing")
			next.ServeHTTP(w, r)
			return
		}
		n.forward(w, r, owner, next)
	})
}

// Peer wraps next, the MCP endpoint of the peer listener: only a request
// a replica forwarded is served (403 otherwise), as one of this replica's
// own, and never forwarded again.
func (n *Node) Peer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.checkPeer(r); err != nil {
			n.log.Warn().Err(err).Str("remote", r.RemoteAddr).Msg("peer request refused")
			http.Error(w, "Forbidden: not a request from a replica", http.StatusForbidden)
			return
		}
		r.Header.Del(PeerHeader)
		serveAnswered(w, r, next, n.log)
	})
}

// ownerOf returns the owner r's ids name ("" when none opens) and r with
// its body as read, if it was. A session id decides; a 2026-07-28
// request that may resume a round is read for its requestState. ok is
// false when the body could not be read (r was answered).
func (n *Node) ownerOf(w http.ResponseWriter, r *http.Request) (string, *http.Request, bool) {
	if sid := r.Header.Get(server.HeaderKeySessionID); sid != "" {
		owner, _, err := n.ring.Open(purposeSession, strings.TrimPrefix(sid, sessionPrefix))
		if err != nil {
			return "", r, true
		}
		return owner, r, true
	}
	if r.Method != http.MethodPost || !mayResume(r.Header) || r.ContentLength > n.maxBody {
		return "", r, true
	}
	body, ok := n.readBody(w, r)
	if !ok {
		return "", r, false
	}
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	state, ok := requestState(body)
	if !ok {
		return "", r, true
	}
	owner, _, err := n.ring.Open(purposeState, state)
	if err != nil {
		return "", r, true
	}
	return owner, r, true
}

// mayResume reports whether a request's headers say it is a 2026-07-28
// request of a kind a round's retry is: the only ones read for their
// requestState.
func mayResume(h http.Header) bool {
	if !mcp.IsModernProtocol(h.Get(mcp.HeaderProtocolVersion)) {
		return false
	}
	switch mcp.MCPMethod(h.Get(mcp.HeaderMethod)) {
	case mcp.MethodToolsCall, mcp.MethodPromptsGet, mcp.MethodResourcesRead:
		return true
	}
	return false
}

// readBody reads r's body, at most maxBody bytes of it, within
// readTimeout; a longer one is left for the endpoint to refuse (what was
// read is put back by the caller). false when the client failed to send it
// (answered 400 or 408).
func (n *Node) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(n.readTimeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	b, err := io.ReadAll(io.LimitReader(r.Body, n.maxBody+1))
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, "Bad Request: could not read the request body", http.StatusBadRequest)
		return nil, false
	}
	return b, true
}

// requestState returns params.requestState of a JSON-RPC request, if it
// has one that is a plain string.
func requestState(body []byte) (string, bool) {
	if !bytes.Contains(body, []byte(`"requestState"`)) {
		return "", false
	}
	msg, ok := jsonwire.Members(body)
	if !ok {
		return "", false
	}
	p := msg.Only("params")
	if p == nil {
		return "", false
	}
	params, ok := jsonwire.Members(body[p.Start:p.End])
	if !ok {
		return "", false
	}
	s := params.Only("requestState")
	if s == nil {
		return "", false
	}
	v := body[p.Start+s.Start : p.Start+s.End]
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v[1:len(v)-1], '\\') >= 0 || bytes.IndexByte(v[1:len(v)-1], '"') >= 0 {
		return "", false // sealed states are base64url: no escapes
	}
	return string(v[1 : len(v)-1]), true
}

// forward sends r to owner's peer listener and relays the answer as it
// comes (an event stream flushed event by event). An owner that cannot be
// reached is gone: r is served locally, where its ids name nothing. An
// owner that failed once it had the request answers 502: the request may
// or may not have taken effect.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, owner string, local http.Handler) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		b, ok := n.readBody(w, r)
		if !ok {
			return
		}
		if int64(len(b)) > n.maxBody {
			// Over the limit: the owner would refuse it as the local
			// endpoint does.
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
			local.ServeHTTP(w, r)
			return
		}
		body = b
	}
	out := outgoing(r, owner)
	n.sign(out)
	resp, done, err := n.client.exchange(r.Context(), owner, out, body)
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		return // the client went away; nobody to answer
	case errors.Is(err, errDial):
		n.log.Info().Err(err).Str("owner", owner).Msg("the request's owner cannot be reached: served as one that names nothing")
		if body != nil {
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		local.ServeHTTP(w, r)
		return
	default:
		n.log.Warn().Err(err).Str("owner", owner).Msg("the request's owner failed while answering it")
		http.Error(w, "Bad Gateway: the replica that owns this session or round failed while answering; the request may or may not have taken effect", http.StatusBadGateway)
		return
	}
	defer done()
	if err := relay(w, resp, n.writeTimeout); err != nil && r.Context().Err() == nil {
		if errors.Is(err, errCut) {
			n.log.Warn().Err(err).Str("owner", owner).Msg("the request's owner failed while answering it: the answer is cut")
		}
		// The answer has begun: cut it, so that the client sees it is
		// not whole, as net/http does for a handler that aborts.
		panic(http.ErrAbortHandler)
	}
}

// outgoing is r as it goes to owner's peer listener: the same method,
// URI, Host (which the owner checks as its own) and end-to-end headers.
// Its body is set by the exchange.
func outgoing(r *http.Request, owner string) *http.Request {
	u := *r.URL
	u.Scheme, u.Host = "http", owner
	out := &http.Request{Method: r.Method, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.Header.Clone(), Host: r.Host}
	dropHopHeaders(out.Header)
	return out
}
