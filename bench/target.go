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

// target is one thing the benchmark measures: how to start it and what to
// call on it.
type target struct {
	name string
	// base names the target its ratios are taken against ("" for none).
	base string
	// children is the number of benchmark children behind it (0: direct).
	children int
	// echo and big are the tool names of echo and big on it; tools is how
	// many tools a full tools/list holds.
	echo, big string
	tools     int
	start     func(ctx context.Context, dir string) (*running, error)
}

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

// startProcess starts name with args, its stderr going to a log file in
// dir. With stdio, the client speaks MCP over its stdin and stdout;
// otherwise waitURL returns the URL to connect to once the process has
// told it on stderr.
func startProcess(ctx context.Context, dir, label string, stdio bool, waitURL func(*watchLog) (<-chan logLine, func(string) string), name string, args ...string) (*running, error) {
	log, err := newWatchLog(filepath.Join(dir, label+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stderr = log
	var (
		in    io.WriteCloser
		out   io.ReadCloser
		url   <-chan logLine
		urlOf func(string) string
	)
	if stdio {
		if in, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
		if out, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	} else {
		url, urlOf = waitURL(log)
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
	if stdio {
		c = client.NewClient(transport.NewIO(out, in, nil))
	} else {
		select {
		case l := <-url:
			c, err = client.NewStreamableHttpClient(urlOf(l.text))
		case <-waited:
			err = errors.New("exited before it listened")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err == nil {
		r.c = c
		err = r.initialize(ctx)
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
func connectURL(ctx context.Context, url string) (*running, error) {
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return nil, err
	}
	r := &running{c: c, started: time.Now()}
	if err := r.initialize(ctx); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return r, nil
}

// clientProtocol is the protocol version every client asks for (-protocol);
// "" leaves the choice to mcp-go's client.
var clientProtocol string

func (r *running) initialize(ctx context.Context) error {
	if err := r.c.Start(context.Background()); err != nil {
		return err
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpbench", Version: "1"}
	init.Params.ProtocolVersion = clientProtocol
	begun := time.Now()
	if _, err := r.c.Initialize(ctx, init); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	r.initDur = time.Since(begun)
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

// listening matches echochild's "listening on ADDR" line.
func listening(w *watchLog) (<-chan logLine, func(string) string) {
	return w.await(func(l string) bool { return strings.HasPrefix(l, "listening on ") }),
		func(l string) string { return "http://" + strings.TrimPrefix(l, "listening on ") + "/mcp" }
}

// servingHTTP matches mcpmux's "serving HTTP" line.
func servingHTTP(w *watchLog) (<-chan logLine, func(string) string) {
	return w.await(jsonMsg("serving HTTP")), func(l string) string {
		var v struct{ Addr string }
		_ = json.Unmarshal([]byte(l), &v)
		return "http://" + v.Addr + "/mcp"
	}
}
