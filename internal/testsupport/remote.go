package testsupport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Remote is a labserver serving MCP over HTTP in a process of its own, the
// way a remote child of mcpmux runs: mcpmux reaches it at URL and neither
// starts nor stops it; the test does, with Kill and Restart.
type Remote struct {
	// Alias is the [servers.X] table it is configured under; it is also its
	// LAB_SOURCE, and its append_note writes to Lab.NotesOf(Alias).
	Alias string
	// Transport is "" (streamable HTTP, at /mcp) or "sse" (legacy, at /sse).
	Transport string
	// Addr is the host:port it listens on; every restart binds it again.
	Addr string

	lab *Lab
	t   testing.TB
	out *SyncBuffer // stderr of every run, in order

	mu   sync.Mutex
	proc *remoteProc // the running process; nil after Kill
	runs int
}

type remoteProc struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // valid once exited is closed
}

// StartRemote starts a labserver for alias on 127.0.0.1 with a port of the
// operating system's choosing, and waits until it listens. It is killed at
// cleanup. transport is "" or "streamable" for streamable HTTP, "sse" for
// the legacy transport.
func StartRemote(t testing.TB, lab *Lab, alias, transport string) *Remote {
	t.Helper()
	if transport == "streamable" {
		transport = ""
	}
	r := &Remote{Alias: alias, Transport: transport, lab: lab, t: t, out: &SyncBuffer{}}
	t.Cleanup(func() {
		r.mu.Lock()
		p := r.proc
		r.mu.Unlock()
		if p != nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	r.Addr = r.run("127.0.0.1:0")
	return r
}

// URL is the MCP endpoint mcpmux is to be configured with.
func (r *Remote) URL() string {
	if r.Transport == "sse" {
		return "http://" + r.Addr + "/sse"
	}
	return "http://" + r.Addr + "/mcp"
}

// Pid is the process id of the running labserver.
func (r *Remote) Pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		r.t.Fatal("remote labserver is not running")
	}
	return r.proc.cmd.Process.Pid
}

// Kill ends the labserver with SIGKILL, as a crash would, and waits until it
// is gone: its sockets are closed by then.
func (r *Remote) Kill() {
	r.t.Helper()
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p == nil {
		r.t.Fatal("remote labserver is not running")
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		r.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(Wait):
		r.t.Fatal("remote labserver did not die of SIGKILL")
	}
}

// Restart starts a new labserver on the same address, after Kill, and waits
// until it listens. The new process knows none of the old one's sessions.
func (r *Remote) Restart() {
	r.t.Helper()
	r.mu.Lock()
	running := r.proc != nil
	r.mu.Unlock()
	if running {
		r.t.Fatal("Restart: the remote labserver is still running; Kill it first")
	}
	if got := r.run(r.Addr); got != r.Addr {
		r.t.Fatalf("restarted labserver listens on %s, want %s", got, r.Addr)
	}
}

// Output is what every run of the labserver wrote to its stderr.
func (r *Remote) Output() string { return r.out.String() }

// run starts a labserver listening on addr and returns the address it bound.
func (r *Remote) run(addr string) string {
	r.t.Helper()
	_, bin := Binaries(r.t)
	r.mu.Lock()
	r.runs++
	n := r.runs
	r.mu.Unlock()
	addrFile := filepath.Join(r.lab.Dir, fmt.Sprintf("addr.%s.%d", r.Alias, n))
	cmd := exec.Command(bin)
	env := append(os.Environ(),
		"LAB_HTTP_ADDR="+addr,
		"LAB_ADDR_FILE="+addrFile,
		"LAB_SOURCE="+r.Alias,
		"LAB_NOTES="+r.lab.Notes+"."+r.Alias,
		"LAB_STARTED_DIR="+r.lab.Started,
	)
	if r.Transport != "" {
		env = append(env, "LAB_HTTP_TRANSPORT="+r.Transport)
	}
	cmd.Env = env
	cmd.Stdout = r.out
	cmd.Stderr = r.out
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &remoteProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()

	var bound []byte
	WaitFor(r.t, "remote labserver "+r.Alias+" to listen", func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		b, err := os.ReadFile(addrFile)
		if err == nil && len(b) > 0 {
			bound = b
			return true
		}
		return false
	})
	if bound == nil {
		<-p.exited
		r.mu.Lock()
		r.proc = nil
		r.mu.Unlock()
		r.t.Fatalf("remote labserver exited before listening (%v); output:\n%s", p.err, r.Output())
	}
	return strings.TrimSpace(string(bound))
}

// RemoteServer is a [servers.X] table for a remote child.
type RemoteServer struct {
	Alias     string
	URL       string
	Transport string // "" leaves it unset (streamable)
	// Headers are written as given; ${VAR} in a value is expanded by mcpmux.
	Headers  map[string]string
	Hide     []string
	ReadOnly []string
	// Extra is raw TOML appended to the table (e.g. `ping_interval = "1s"`).
	Extra string
}

// AddRemote appends a remote child's table to the lab's config.
func (l *Lab) AddRemote(t testing.TB, s RemoteServer) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n[servers.%s]\nurl = %q\n", s.Alias, s.URL)
	if s.Transport != "" {
		fmt.Fprintf(&b, "transport = %q\n", s.Transport)
	}
	if len(s.Headers) > 0 {
		writeInlineTable(&b, "headers", s.Headers)
	}
	writeServerTail(&b, s.Hide, s.ReadOnly, s.Extra)
	l.appendConfig(t, b.String())
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output, a log) and a test's reads at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Bytes returns a copy of what has been written so far.
func (s *SyncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// Client connects a client of the test's own to the running labserver, next
// to mcpmux's session: what it does there (notify_changed) reaches mcpmux
// as a notification no request of mcpmux's led to. It is closed at cleanup.
func (r *Remote) Client(t testing.TB) *client.Client {
	t.Helper()
	var c *client.Client
	var err error
	if r.Transport == "sse" {
		c, err = client.NewSSEMCPClient(r.URL())
	} else {
		c, err = client.NewStreamableHttpClient(r.URL())
	}
	if err != nil {
		t.Fatal(err)
	}
	// The SSE transport's event stream lives as long as Start's context.
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpmux-test-direct", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize the direct client: %v", err)
	}
	return c
}

// WaitToolsWithin is WaitTools with a bound of d instead of Wait, for a
// list_changed that is due promptly.
func (m *Mux) WaitToolsWithin(d time.Duration, what string, cond func(names []string) bool) []string {
	m.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case n := <-m.notes:
			if n.Method != mcp.MethodNotificationToolsListChanged {
				continue
			}
		case <-timeout:
			m.t.Fatalf("no list_changed within %s after which the tool list %s; last: %v", d, what, m.ToolNames())
		}
		if names := m.ToolNames(); cond(names) {
			return names
		}
	}
}
