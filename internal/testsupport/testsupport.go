// Package testsupport starts the real things tests need: the mcpmux and
// labserver binaries, config and policy files on disk, and a real MCP client
// connected to mcpmux over its stdio.
package testsupport

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Wait is the failure bound of every wait in the tests: generous, because it
// only ever runs out when something is broken.
const Wait = 15 * time.Second

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Main runs the tests and removes the binaries they built.
//
// Under -race every binary the tests start would sleep a second as it exits
// (GORACE's atexit_sleep_ms), so that reports of races found at the last
// moment get out; each test starts and stops mcpmux and its supervisor at
// least once. Main sets atexit_sleep_ms=0 unless GORACE is set, as e2e/wire
// does: a race found while they run is still reported at once.
func Main(m *testing.M) {
	if os.Getenv("GORACE") == "" {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// RepoRoot returns the module root.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binaries builds mcpmux and labserver once per test process and returns
// their paths.
func Binaries(t testing.TB) (mcpmux, labserver string) {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "mcpmux-test-bin-")
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", buildDir + "/"}
		if raceBuild {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/mcpmux", "./internal/labserver")...)
		cmd.Dir = RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "mcpmux"), filepath.Join(buildDir, "labserver")
}

// Server is one [servers.X] table of a test config.
type Server struct {
	Alias    string
	Env      map[string]string
	Hide     []string
	ReadOnly []string
	// Extra is raw TOML appended to the table (e.g. `startup_timeout = "1s"`).
	Extra string
	// Command overrides the labserver binary.
	Command string
	Args    []string
}

// Lab is a config file and its policy directory on disk.
type Lab struct {
	Dir       string
	Config    string
	PolicyDir string
	// Notes is where each server's append_note writes (LAB_NOTES), one file
	// per alias: Notes + "." + alias.
	Notes string
	// Started is LAB_STARTED_DIR: slow calls leave a file named by their tag.
	Started string

	upstream string // what AddUpstream added to [upstream], kept by Rewrite
}

// NewLab writes a config with the given [mux] lines and servers. Each
// labserver child gets LAB_SOURCE=alias, LAB_NOTES and LAB_STARTED_DIR.
func NewLab(t testing.TB, muxLines string, servers ...Server) *Lab {
	t.Helper()
	_, labserver := Binaries(t)
	dir := t.TempDir()
	l := &Lab{
		Dir:       dir,
		Config:    filepath.Join(dir, "mcpmux.toml"),
		PolicyDir: filepath.Join(dir, "policies"),
		Notes:     filepath.Join(dir, "notes"),
		Started:   filepath.Join(dir, "started"),
	}
	for _, d := range []string{l.PolicyDir, l.Started} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(l.Config, l.configText(muxLines, labserver, servers), 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

// configText is the config of the given [mux] lines and servers.
func (l *Lab) configText(muxLines, labserver string, servers []Server) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "[mux]\npolicy_dir = %q\n%s\n\n[upstream]\nidentity = \"reader\"\n", l.PolicyDir, muxLines)
	for _, s := range servers {
		l.writeServer(&b, s, labserver)
	}
	if l.upstream == "" {
		return []byte(b.String())
	}
	return []byte(strings.Replace(b.String(), upstreamHead, upstreamHead+strings.TrimSpace(l.upstream)+"\n", 1))
}

// Rewrite saves a new config of the given [mux] lines and servers the way
// editors do: a temporary file renamed over the old one.
func (l *Lab) Rewrite(t testing.TB, muxLines string, servers ...Server) {
	t.Helper()
	if err := l.Save(muxLines, servers...); err != nil {
		t.Fatal(err)
	}
}

// Save is Rewrite for a goroutine other than the test's own.
func (l *Lab) Save(muxLines string, servers ...Server) error {
	// NewLab has built the binaries.
	labserver := filepath.Join(buildDir, "labserver")
	tmp := filepath.Join(l.Dir, ".tmp-"+filepath.Base(l.Config))
	if err := os.WriteFile(tmp, l.configText(muxLines, labserver, servers), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.Config)
}

// writeServer writes s's [servers.X] table: its command (labserver unless
// s.Command is set) with the environment NewLab gives each labserver.
func (l *Lab) writeServer(b *strings.Builder, s Server, labserver string) {
	cmd := s.Command
	if cmd == "" {
		cmd = labserver
	}
	fmt.Fprintf(b, "\n[servers.%s]\ncommand = %q\n", s.Alias, cmd)
	if len(s.Args) > 0 {
		fmt.Fprintf(b, "args = %s\n", tomlList(s.Args))
	}
	env := map[string]string{
		"LAB_SOURCE":      s.Alias,
		"LAB_NOTES":       l.Notes + "." + s.Alias,
		"LAB_STARTED_DIR": l.Started,
	}
	maps.Copy(env, s.Env)
	writeInlineTable(b, "env", env)
	writeServerTail(b, s.Hide, s.ReadOnly, s.Extra)
}

// appendConfig appends a table to the lab's config file.
func (l *Lab) appendConfig(t testing.TB, table string) {
	t.Helper()
	f, err := os.OpenFile(l.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(table); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func tomlList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// writeInlineTable writes key = { K = "V", ... } in sorted order.
func writeInlineTable(b *strings.Builder, key string, m map[string]string) {
	b.WriteString(key + " = {")
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(b, " %q = %q", k, m[k])
	}
	b.WriteString(" }\n")
}

// writeServerTail writes the keys every kind of [servers.X] table shares.
func writeServerTail(b *strings.Builder, hide, readOnly []string, extra string) {
	if len(hide) > 0 {
		fmt.Fprintf(b, "hide = %s\n", tomlList(hide))
	}
	if len(readOnly) > 0 {
		fmt.Fprintf(b, "read_only = %s\n", tomlList(readOnly))
	}
	b.WriteString(extra + "\n")
}

// WritePolicy saves identity's policy the way editors do: write a temporary
// file, then rename it over the old one.
func (l *Lab) WritePolicy(t testing.TB, identity, body string) {
	t.Helper()
	tmp := filepath.Join(l.PolicyDir, "."+identity+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(l.PolicyDir, identity+".toml")); err != nil {
		t.Fatal(err)
	}
}

// NotesOf returns what alias's append_note calls wrote.
func (l *Lab) NotesOf(t testing.TB, alias string) string {
	t.Helper()
	b, err := os.ReadFile(l.Notes + "." + alias)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// WaitStarted waits until a slow call tagged tag has reached its child.
func (l *Lab) WaitStarted(t testing.TB, tag string) {
	t.Helper()
	path := filepath.Join(l.Started, tag)
	WaitFor(t, "slow call "+tag+" to reach its server", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// WaitFor polls cond until it holds, failing the test after Wait. It is for
// conditions only the operating system can tell (a file appeared, a process
// is gone), never a stand-in for an event the test could wait on.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Settles(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Alive reports whether a process exists and is not a zombie.
func Alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// ParentPid returns the parent of process pid, from /proc/PID/stat; 0 when
// pid is gone.
func ParentPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The state and the parent follow the parenthesised command name.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// startPiped starts cmd with pipes to its stdin, stdout and stderr.
func startPiped(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser, io.ReadCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, stdout, stderr
}

// Mux is a running mcpmux binary with a real MCP client on its stdio.
type Mux struct {
	Cmd    *exec.Cmd
	Client *client.Client
	// Init is mcpmux's answer to the client's initialize (or, for a
	// 2026-07-28 client, to server/discover).
	Init   *mcp.InitializeResult
	Log    *LogTap
	stdin  io.WriteCloser
	t      testing.TB
	notes  chan mcp.JSONRPCNotification
	exited chan struct{}
	err    error
}

// StartMux starts `mcpmux serve --config lab.Config` with extra args, and
// connects and initializes an MCP client speaking protocol 2025-11-25. The
// process is stopped at cleanup, and the test fails if any child it started
// outlives it.
func StartMux(t testing.TB, lab *Lab, args ...string) *Mux {
	t.Helper()
	return startMux(t, lab, mcp.LATEST_LEGACY_PROTOCOL_VERSION, nil, args)
}

// StartMuxModern is StartMux with a client of protocol 2026-07-28, which has
// no initialize handshake.
func StartMuxModern(t testing.TB, lab *Lab, args ...string) *Mux {
	t.Helper()
	return startMux(t, lab, "", nil, args)
}

// startMux starts mcpmux; prep, when not nil, may change the command
// before it starts.
func startMux(t testing.TB, lab *Lab, version string, prep func(*exec.Cmd), args []string, opts ...client.ClientOption) *Mux {
	t.Helper()
	bin, _ := Binaries(t)
	cmd := exec.Command(bin, append([]string{"serve", "--config", lab.Config}, args...)...)
	if prep != nil {
		prep(cmd)
	}
	stdin, stdout, stderr := startPiped(t, cmd)
	m := &Mux{Cmd: cmd, stdin: stdin, t: t, notes: make(chan mcp.JSONRPCNotification, 64), exited: make(chan struct{})}
	m.Log = newLogTap(stderr)
	go func() {
		<-m.Log.done // stderr ends when mcpmux exits
		m.err = cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(func() {
		m.Stop()
		for _, pid := range m.Log.ChildPids() {
			if Alive(pid) {
				t.Errorf("child pid %d outlived mcpmux", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	tr := transport.NewIO(stdout, stdin, nil)
	if version != "" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	c := client.NewClient(tr, opts...)
	// Start's context is the one mcp-go answers mcpmux's requests under
	// (sampling/createMessage, elicitation/create, roots/list): it must
	// outlive this function, or each is answered "context canceled".
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case m.notes <- n:
		default:
		}
	})
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "mcpmux-test", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v\nlog:\n%s", err, m.Log.Text())
	}
	m.Init = res
	if version == "" && !mcp.IsModernProtocol(c.ProtocolVersion()) {
		t.Fatalf("client negotiated %q, want the modern protocol", c.ProtocolVersion())
	}
	m.Client = c
	return m
}

// Call calls a tool with a bound of Wait.
func (m *Mux) Call(name string, args any) (*mcp.CallToolResult, error) {
	return callTool(context.Background(), m.Client, name, args)
}

// callTool calls a tool under ctx, bounded by Wait.
func callTool(ctx context.Context, c *client.Client, name string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, Wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// MustCall calls a tool and fails the test on a protocol error.
func (m *Mux) MustCall(name string, args any) *mcp.CallToolResult {
	m.t.Helper()
	res, err := m.Call(name, args)
	if err != nil {
		m.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// ToolNames lists the tools mcpmux shows this client, in order.
func (m *Mux) ToolNames() []string {
	m.t.Helper()
	var names []string
	for _, t := range m.RawTools() {
		var head struct{ Name string }
		_ = json.Unmarshal(t, &head)
		names = append(names, head.Name)
	}
	return names
}

// RawTools lists the tools as they come over the wire, following cursors.
func (m *Mux) RawTools() []json.RawMessage {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	var all []json.RawMessage
	cursor := ""
	for page := 1; ; page++ {
		p := m.RawRequest(ctx, "tools/list", map[string]any{"cursor": cursor}, cursor == "")
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(p, &res); err != nil {
			m.t.Fatal(err)
		}
		all = append(all, res.Tools...)
		if res.NextCursor == "" {
			return all
		}
		if page > 100 {
			m.t.Fatal("tools/list does not end")
		}
		cursor = res.NextCursor
	}
}

var rawIDs struct {
	sync.Mutex
	n int
}

// RawRequest sends a request and returns its raw result, failing on an error.
// noParams drops params (for a first tools/list page).
func (m *Mux) RawRequest(ctx context.Context, method string, params map[string]any, noParams bool) json.RawMessage {
	m.t.Helper()
	res, err := m.RawRequestErr(ctx, method, params, noParams)
	if err != nil {
		m.t.Fatalf("%s: %v", method, err)
	}
	return res
}

// RawRequestErr is RawRequest returning the JSON-RPC error.
func (m *Mux) RawRequestErr(ctx context.Context, method string, params map[string]any, noParams bool) (json.RawMessage, error) {
	rawIDs.Lock()
	rawIDs.n++
	id := fmt.Sprintf("raw-%d", rawIDs.n)
	rawIDs.Unlock()
	req := transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: method}
	if !noParams {
		req.Params = params
	}
	resp, err := m.Client.GetTransport().SendRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error.AsError()
	}
	return resp.Result, nil
}

// Notification waits for a notification with the given method.
func (m *Mux) Notification(method string) mcp.JSONRPCNotification {
	m.t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case n := <-m.notes:
			if n.Method == method {
				return n
			}
		case <-timeout:
			m.t.Fatalf("no %s notification", method)
		}
	}
}

// WaitTools waits for tools/list_changed notifications until, after one of
// them, the tool list satisfies cond, and returns that list. A notification
// sent for an earlier change may still be on its way, so the first one to
// arrive proves little by itself.
func (m *Mux) WaitTools(what string, cond func(names []string) bool) []string {
	m.t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case n := <-m.notes:
			if n.Method != mcp.MethodNotificationToolsListChanged {
				continue
			}
		case <-timeout:
			m.t.Fatalf("no list_changed after which the tool list %s; last: %v", what, m.ToolNames())
		}
		if names := m.ToolNames(); cond(names) {
			return names
		}
	}
}

// Contains reports whether names has name.
func Contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// Pending forgets the notifications received so far and returns those of
// method among them.
func (m *Mux) Pending(method string) []mcp.JSONRPCNotification {
	var out []mcp.JSONRPCNotification
	for {
		select {
		case n := <-m.notes:
			if n.Method == method {
				out = append(out, n)
			}
		default:
			return out
		}
	}
}

// DrainNotifications forgets notifications received so far.
func (m *Mux) DrainNotifications() {
	for {
		select {
		case <-m.notes:
		default:
			return
		}
	}
}

// CloseStdin closes mcpmux's stdin, which starts its shutdown, and does
// not wait for it to exit (Exited says when it has).
func (m *Mux) CloseStdin() { _ = m.stdin.Close() }

// Stop closes mcpmux's stdin and waits for it to exit.
func (m *Mux) Stop() error {
	_ = m.stdin.Close()
	awaitExit(m.t, m.Cmd, m.exited, m.Log, "after its stdin closed")
	return m.err
}

// awaitExit waits for a started mcpmux to exit. If it does not, the test
// fails with its log, which then ends with every goroutine: SIGQUIT makes
// the Go runtime print them.
func awaitExit(t testing.TB, cmd *exec.Cmd, exited <-chan struct{}, log *LogTap, after string) {
	t.Helper()
	select {
	case <-exited:
		return
	case <-time.After(Wait):
	}
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(Wait):
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Errorf("mcpmux did not exit %s; log:\n%s", after, log.Text())
}

// Exited is closed once the mcpmux process has exited.
func (m *Mux) Exited() <-chan struct{} { return m.exited }

// ExitErr is how mcpmux exited; valid after Exited.
func (m *Mux) ExitErr() error { return m.err }

// LogTap collects mcpmux's JSON log lines from stderr and lets tests wait
// for one.
type LogTap struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   []string
	more  chan struct{} // closed and replaced whenever a line arrives
	done  chan struct{}
}

func newLogTap(r io.Reader) *LogTap {
	l := &LogTap{more: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			var line map[string]any
			_ = json.Unmarshal(sc.Bytes(), &line)
			l.mu.Lock()
			l.raw = append(l.raw, sc.Text())
			if line != nil {
				l.lines = append(l.lines, line)
			}
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	return l
}

// WaitLine waits for a log line for which match holds and returns it. Lines
// already seen count.
func (l *LogTap) WaitLine(t testing.TB, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	return l.WaitLineWithin(t, Wait, what, match)
}

// WaitLineWithin is WaitLine with a bound of d instead of Wait, for a line
// that slow work (a large call under the race detector) comes before.
func (l *LogTap) WaitLineWithin(t testing.TB, d time.Duration, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	return l.waitLine(t, d, 0, what, match)
}

// Mark is how many lines have been logged so far, for WaitLineAfter.
func (l *LogTap) Mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// WaitLineAfter is WaitLine for a line logged after the first mark ones
// (Mark): it never looks at those, however many there are.
func (l *LogTap) WaitLineAfter(t testing.TB, mark int, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	return l.waitLine(t, Wait, mark, what, match)
}

func (l *LogTap) waitLine(t testing.TB, d time.Duration, seen int, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	timeout := time.After(d)
	for {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if match(l.lines[seen]) {
				line := l.lines[seen]
				l.mu.Unlock()
				return line
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-more:
		case <-l.done:
			// One last look, then give up.
			l.mu.Lock()
			n := len(l.lines)
			l.mu.Unlock()
			if seen == n {
				t.Fatalf("mcpmux exited without logging %s\nlog:\n%s", what, l.Text())
			}
		case <-timeout:
			t.Fatalf("no log line for %s\nlog:\n%s", what, l.Text())
		}
	}
}

// WaitLines waits until at least n of the lines logged match, and returns
// every one that matches by then. mcpmux writes its log in batches, some
// milliseconds after what it answered on stdout or over HTTP: what is
// counted after an answer, rather than after a line logged later, is to be
// waited for.
func (l *LogTap) WaitLines(t testing.TB, what string, n int, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	timeout := time.After(Wait)
	for {
		// The count and the channel that says "more came" are read under one
		// lock: a line arriving between them would otherwise wake nobody.
		l.mu.Lock()
		got := l.matching(match)
		more := l.more
		l.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-more:
		case <-l.done:
			if got := l.Lines(match); len(got) >= n {
				return got
			}
			t.Fatalf("mcpmux exited with %d of %d lines for %s logged\nlog:\n%s", len(l.Lines(match)), n, what, l.Text())
		case <-timeout:
			t.Fatalf("%d of %d lines for %s logged\nlog:\n%s", len(l.Lines(match)), n, what, l.Text())
		}
	}
}

// Lines returns the JSON lines logged so far that match.
func (l *LogTap) Lines(match func(map[string]any) bool) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.matching(match)
}

// matching is Lines for a caller that holds l.mu.
func (l *LogTap) matching(match func(map[string]any) bool) []map[string]any {
	var out []map[string]any
	for _, line := range l.lines {
		if match(line) {
			out = append(out, line)
		}
	}
	return out
}

// Text returns everything logged so far.
func (l *LogTap) Text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.raw, "\n")
}

// WaitFirstCatalog waits until mcpmux has built its first merged catalog
// and told the sessions open at that moment: it logs that it pinned the
// catalog's tools and prompts on first sight after that. A client that
// writes before may get a list_changed of each list for the first catalog,
// before or after its initialize's answer. It needs pinning on (the
// default) and a pin file that does not exist yet (a new lab).
func (l *LogTap) WaitFirstCatalog(t testing.TB) {
	t.Helper()
	l.WaitLine(t, "the first catalog", Msg("tools and prompts pinned on first sight"))
}

// ChildPids returns the pid of every child process mcpmux reported ready.
func (l *LogTap) ChildPids() []int {
	var pids []int
	for _, line := range l.Lines(Msg("server ready")) {
		if pid, ok := line["pid"].(float64); ok {
			pids = append(pids, int(pid))
		}
	}
	return pids
}

// Msg matches lines with the given message and, pairwise, string fields.
func Msg(msg string, kv ...string) func(map[string]any) bool {
	return func(line map[string]any) bool {
		if line["message"] != msg {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if fmt.Sprint(line[kv[i]]) != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// Text returns the text of a result's content, joined.
func Text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
