package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// childComm is the command name of the benchmark's child in /proc.
const childComm = "echochild"

// target is one thing the benchmark measures at one protocol era: how to
// start it and what to call on it.
type target struct {
	name string
	// proto is the protocol version its client asks for, and must get.
	proto string
	// base names the target (at the same era) its ratios are taken
	// against ("" for none).
	base string
	kind targetKind
	// children is the number of benchmark children behind it (0: direct).
	children int
	// echo and big are the tool names of echo and big on it; tools is how
	// many tools a full tools/list holds.
	echo, big string
	tools     int
	// mayLack says the target may not serve proto: it is then shown as
	// n/a rather than failing the run. lacks is set once it did not.
	mayLack bool
	lacks   bool
	start   func(ctx context.Context, dir string) (*running, error)
}

// targetKind tells the tables how to place a target.
type targetKind int

const (
	kindDirect targetKind = iota // the child on its own
	kindMux                      // mcpmux
	kindTBXark                   // TBXark/mcp-proxy
	kindExtra                    // -extra-stdio, -extra-http
	kindFloor                    // linecopy: a proxy that only copies bytes
)

// proxied says whether a target's tree holds a proxy in front of the
// benchmark child, whose own figures (memory, CPU) are then shown.
func (t *target) proxied() bool {
	return t.kind == kindMux || t.kind == kindTBXark || t.kind == kindFloor
}

// key identifies t's samples: its name at its era.
func (t *target) key() targetKey { return targetKey{t.proto, t.name} }

type targetKey struct{ proto, name string }

// errEraUnsupported is returned by initialize when the server answered
// with another protocol version than the client asked for.
var errEraUnsupported = errors.New("the server does not serve this protocol version")

// running is a started target with a client connected and initialized.
type running struct {
	c *client.Client
	// cmd is the target's process (nil for a URL the benchmark did not
	// start); stop ends it and waits for it.
	cmd     *exec.Cmd
	stop    func()
	started time.Time
	// initDur is the initialize round trip of the client.
	initDur time.Duration
	log     *watchLog
}

func (r *running) pid() int {
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// close closes the client and ends the target's process.
func (r *running) close() {
	_ = r.c.Close()
	if r.stop != nil {
		r.stop()
	}
}

// watchLog keeps a process's stderr in a file and tells of lines matching
// what a caller waits for.
type watchLog struct {
	mu      sync.Mutex
	f       *os.File
	partial []byte
	waits   []logWait
}

type logWait struct {
	match func(string) bool
	ch    chan logLine
}

// logLine is a line and when the benchmark read it.
type logLine struct {
	text string
	at   time.Time
}

func newWatchLog(path string) (*watchLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &watchLog{f: f}, nil
}

func (w *watchLog) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waits) > 0 {
		w.partial = append(w.partial, p...)
		for {
			i := bytes.IndexByte(w.partial, '\n')
			if i < 0 {
				break
			}
			line := string(w.partial[:i])
			w.partial = w.partial[i+1:]
			keep := w.waits[:0]
			for _, lw := range w.waits {
				if lw.match(line) {
					lw.ch <- logLine{line, now}
				} else {
					keep = append(keep, lw)
				}
			}
			w.waits = keep
		}
	} else {
		w.partial = w.partial[:0]
	}
	return w.f.Write(p)
}

// await returns a channel that receives the next line match accepts.
func (w *watchLog) await(match func(string) bool) <-chan logLine {
	ch := make(chan logLine, 1)
	w.mu.Lock()
	w.waits = append(w.waits, logWait{match, ch})
	w.mu.Unlock()
	return ch
}

// tail returns the end of the log, for an error message.
func (w *watchLog) tail() string {
	b, _ := os.ReadFile(w.f.Name())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// jsonMsg matches a zerolog line with the given msg.
func jsonMsg(msg string) func(string) bool {
	return func(line string) bool {
		var v struct{ Message string }
		return json.Unmarshal([]byte(line), &v) == nil && v.Message == msg
	}
}

// httpReady is called before an HTTP target's process starts, so that no
// line of its log is missed, and returns what waits until the process
// serves, with its URL; exited is closed if the process ends first.
type httpReady func(w *watchLog) func(ctx context.Context, pid int, exited <-chan struct{}) (string, error)

// errExited is returned while waiting for a process that ended instead.
var errExited = errors.New("exited before it listened")

// startProcess starts name with args, its stderr going to a log file in
// dir, and connects a client asking for protocol version proto. With
// ready nil, the client speaks MCP over the process's stdin and stdout;
// otherwise over streamable HTTP at the URL ready returns.
func startProcess(ctx context.Context, dir, label, proto string, ready httpReady, name string, args ...string) (*running, error) {
	log, err := newWatchLog(filepath.Join(dir, label+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stderr = log
	var (
		in      io.WriteCloser
		out     io.ReadCloser
		waitURL func(context.Context, int, <-chan struct{}) (string, error)
	)
	if ready == nil {
		if in, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		if out, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	} else {
		waitURL = ready(log)
	}
	r := &running{cmd: cmd, log: log, started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	r.stop = func() {
		if in != nil {
			_ = in.Close()
		} else {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
		_ = log.f.Close()
	}
	var c *client.Client
	if ready == nil {
		c = client.NewClient(transport.NewIO(out, in, nil))
	} else {
		var url string
		if url, err = waitURL(ctx, cmd.Process.Pid, waited); err == nil {
			c, err = client.NewStreamableHttpClient(url)
		}
	}
	if err == nil {
		r.c = c
		err = r.initialize(ctx, proto)
	}
	if err != nil {
		if r.c != nil {
			_ = r.c.Close()
		}
		r.stop()
		return nil, fmt.Errorf("%s: %w\n%s", label, err, log.tail())
	}
	return r, nil
}

// connectURL connects to a streamable HTTP URL the benchmark did not start.
func connectURL(ctx context.Context, url, proto string) (*running, error) {
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return nil, err
	}
	r := &running{c: c, started: time.Now()}
	if err := r.initialize(ctx, proto); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return r, nil
}

// initialize starts the client and makes its handshake at protocol
// version proto (initialize, or server/discover from 2026-07-28 on); it
// fails with errEraUnsupported if the server settles on another version
// (mcp-go's client falls back to the newest earlier one it can).
func (r *running) initialize(ctx context.Context, proto string) error {
	if err := r.c.Start(context.Background()); err != nil {
		return err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpbench", Version: "1"}
	init.Params.ProtocolVersion = proto
	begun := time.Now()
	res, err := r.c.Initialize(ctx, init)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	r.initDur = time.Since(begun)
	if res.ProtocolVersion != proto {
		return fmt.Errorf("asked for %s, answered %s: %w", proto, res.ProtocolVersion, errEraUnsupported)
	}
	return nil
}

// waitCatalog lists tools until the list holds want tools (a mux may
// answer before its children are all up), returning when it first did.
func (r *running) waitCatalog(ctx context.Context, want int) (time.Time, error) {
	for {
		res, err := r.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			return time.Time{}, fmt.Errorf("tools/list: %w", err)
		}
		if len(res.Tools) >= want {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("tools/list holds %d tools, want %d: %w", len(res.Tools), want, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// onLine returns an httpReady that waits for the first log line match
// accepts and takes the URL from it.
func onLine(match func(string) bool, urlOf func(string) string) httpReady {
	return func(w *watchLog) func(context.Context, int, <-chan struct{}) (string, error) {
		ch := w.await(match)
		return func(ctx context.Context, _ int, exited <-chan struct{}) (string, error) {
			select {
			case l := <-ch:
				return urlOf(l.text), nil
			case <-exited:
				return "", errExited
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
}

// listening matches echochild's "listening on ADDR" line.
var listening = onLine(func(l string) bool { return strings.HasPrefix(l, "listening on ") },
	func(l string) string { return "http://" + strings.TrimPrefix(l, "listening on ") + "/mcp" })

// servingHTTP matches mcpmux's "serving HTTP" line.
var servingHTTP = onLine(jsonMsg("serving HTTP"), func(l string) string {
	var v struct{ Addr string }
	_ = json.Unmarshal([]byte(l), &v)
	return "http://" + v.Addr + "/mcp"
})
