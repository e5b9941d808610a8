package testsupport

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/seal"
)

// Replicas are mcpmux replicas sharing one config and one key file, each
// on loopback ports of its own: a public listener and a peer listener.
type Replicas struct {
	Lab     *Lab
	KeyFile string
	Public  []string // each replica's public host:port
	Peer    []string // each replica's peer host:port, also its advertised address
	Mux     []*HTTPMux
	t       testing.TB
}

// FreePort returns a loopback host:port nothing listens on now.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// NewReplicaKey returns a fresh key, as a key file line.
func NewReplicaKey() string {
	b := make([]byte, seal.KeySize)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// StartReplicas writes a key file and lab's [replicas] table (static peers)
// and starts n replicas of lab's config.
func StartReplicas(t testing.TB, lab *Lab, n int) *Replicas {
	t.Helper()
	r := &Replicas{Lab: lab, KeyFile: filepath.Join(lab.Dir, "replica-key", "key"), t: t}
	if err := os.MkdirAll(filepath.Dir(r.KeyFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.KeyFile, []byte(NewReplicaKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range n {
		r.Public = append(r.Public, FreePort(t))
		r.Peer = append(r.Peer, FreePort(t))
	}
	lab.appendConfig(t, fmt.Sprintf("\n[replicas]\nkey_file = %q\nlisten = \"${MCPMUX_PEER_LISTEN}\"\nadvertise = \"${MCPMUX_PEER_LISTEN}\"\npeers = %s\n",
		r.KeyFile, tomlList(r.Peer)))
	r.Mux = make([]*HTTPMux, n)
	for i := range n {
		r.Start(i)
	}
	return r
}

// Start starts replica i, again if it ran before, on its own ports.
func (r *Replicas) Start(i int) {
	r.t.Helper()
	r.Mux[i] = StartHTTPMux(r.t, r.Lab, HTTPStart{
		Args:      []string{"--listen", r.Public[i]},
		Env:       []string{"MCPMUX_PEER_LISTEN=" + r.Peer[i]},
		Listeners: 2,
	})
}

// Kill ends replica i with SIGKILL and waits for it to be gone.
func (r *Replicas) Kill(i int) {
	r.t.Helper()
	r.Mux[i].Signal(syscall.SIGKILL)
	<-r.Mux[i].Exited()
}

// Replace stops replica i with SIGTERM, as a rolling update does: it
// drains (its /readyz answers 503, its calls in flight finish) and exits;
// Replace waits for that, failing the test if it did not exit cleanly,
// then starts it again on the same ports and waits until it is ready.
func (r *Replicas) Replace(i int) {
	r.t.Helper()
	if err := r.Mux[i].Stop(); err != nil {
		r.t.Errorf("replica %d after SIGTERM: %v", i, err)
	}
	r.Start(i)
	r.WaitReady(i)
}

// WaitReady waits until replica i's /readyz answers 200 (its children
// are up), as a load balancer's health check sees it.
func (r *Replicas) WaitReady(i int) {
	r.t.Helper()
	c := &http.Client{Timeout: time.Second}
	WaitFor(r.t, fmt.Sprintf("replica %d to be ready", i), func() bool {
		resp, err := c.Get("http://" + r.Public[i] + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// OwnerOf returns the index of the replica a sealed id (a session id, or
// a requestState) names as its owner, failing the test when none does.
func (r *Replicas) OwnerOf(purpose, id string) int {
	r.t.Helper()
	i, err := r.OwnerOfErr(purpose, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return i
}

// OwnerOfErr is OwnerOf returning what is wrong, for a goroutine other
// than the test's.
func (r *Replicas) OwnerOfErr(purpose, id string) (int, error) {
	keys, err := seal.ReadKeys(r.KeyFile)
	if err != nil {
		return -1, err
	}
	owner, _, err := seal.NewRing(keys).Open(purpose, strings.TrimPrefix(id, "mcp-session-"))
	if err != nil {
		return -1, fmt.Errorf("id %q: %v", id, err)
	}
	for i, p := range r.Peer {
		if p == owner {
			return i, nil
		}
	}
	return -1, fmt.Errorf("id %q names %q, which is no replica", id, owner)
}

// HAProxy is a running haproxy in front of some replicas.
type HAProxy struct {
	Addr string // host:port clients connect to
	cmd  *exec.Cmd
}

// HAProxyBinary returns haproxy's path, skipping t when it is not
// installed unless MCPMUX_NEED_HAPROXY is set (test.sh installs it).
func HAProxyBinary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("MCPMUX_NEED_HAPROXY") != "" {
			t.Fatalf("haproxy is needed: %v", err)
		}
		t.Skip("haproxy not installed (apt-get install haproxy)")
	}
	return p
}

// HAProxyCheck is how haproxy checks its backends' health.
type HAProxyCheck struct {
	Path  string        // GET this; 2xx and 3xx are up
	Inter time.Duration // this often; a single failure takes a server out
}

// StartHAProxy starts haproxy balancing HTTP requests round robin over
// backends, each request on its own (no stickiness, no preference for the
// last server), with health checks on /healthz so that a replica that is
// gone is left out, and a request that could not connect retried on
// another. It returns once a request through it is answered. haproxy is
// stopped at cleanup.
func StartHAProxy(t testing.TB, dir string, backends []string) *HAProxy {
	t.Helper()
	return StartHAProxyChecked(t, dir, backends, HAProxyCheck{Path: "/healthz", Inter: 200 * time.Millisecond})
}

// StartHAProxyChecked is StartHAProxy with the health check given: on
// /readyz, which answers 503 while a replica drains or its children are
// not up, haproxy sends a replica nothing new from then on. Each request
// has a server connection of its own (http-server-close): one a replica
// closes as it drains or dies is never reused for the next request, so
// that a request haproxy could not deliver is one it could not connect
// for, which it sends to another replica (retries, redispatch), and one
// it delivered is never sent twice.
func StartHAProxyChecked(t testing.TB, dir string, backends []string, check HAProxyCheck) *HAProxy {
	t.Helper()
	bin := HAProxyBinary(t)
	h := &HAProxy{Addr: FreePort(t)}
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout tunnel 60s
  retries 3
  option redispatch 1
  option http-server-close
frontend mcp
  bind %s
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET %s
`, h.Addr, check.Path)
	for i, a := range backends {
		fmt.Fprintf(&b, "  server r%d %s check inter %dms fall 1 rise 1\n", i, a, check.Inter.Milliseconds())
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	h.cmd = exec.Command(bin, "-db", "-f", cfg)
	out := &strings.Builder{}
	h.cmd.Stdout, h.cmd.Stderr = out, out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(Wait):
			_ = h.cmd.Process.Kill()
			<-exited
		}
	})
	c := &http.Client{Timeout: time.Second}
	WaitFor(t, "haproxy to answer", func() bool {
		select {
		case <-exited:
			t.Fatalf("haproxy exited: %s", out)
		default:
		}
		resp, err := c.Get("http://" + h.Addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return h
}

// URL is the MCP endpoint through haproxy.
func (h *HAProxy) URL() string { return "http://" + h.Addr + "/mcp" }
