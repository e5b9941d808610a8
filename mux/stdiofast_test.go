package mux

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/policy"
)

// fastPolicy is the policy of eq, the identity of the fast-path tests: one
// tool denied, one refused by a rule on its arguments, one hidden by a rule
// that ignores them.
const fastPolicy = `allow = ["lab__*"]
deny = ["lab__denied"]

[[rule]]
tools = ["lab__guarded"]
allow_if = 'args.ok == true'
message = "needs ok"

[[rule]]
tools = ["lab__ruled"]
allow_if = 'claims.team == "ops"'
`

// startFastLab starts a Mux for eq on a lab child whose tools answer the
// ways a call can end (text, isError, big, structured), with one tool
// hidden by the config; it returns the Mux and its log.
func startFastLab(tb testing.TB) (*Mux, *testsupport.SyncBuffer) {
	tb.Helper()
	echo := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
	}
	big := strings.Repeat("<big> & é \u2028 ", 300<<10/16)
	tools := []server.ServerTool{
		{Tool: mcp.NewTool("echo"), Handler: echo},
		{Tool: mcp.NewTool("guarded"), Handler: echo},
		{Tool: mcp.NewTool("ruled"), Handler: echo},
		{Tool: mcp.NewTool("denied"), Handler: echo},
		{Tool: mcp.NewTool("secret"), Handler: echo},
		{Tool: mcp.NewTool("typed", mcp.WithNumber("n", mcp.Required())), Handler: echo},
		{Tool: mcp.NewTool("fail"), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it failed <here>"), nil
		}},
		{Tool: mcp.NewTool("big"), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(big), nil
		}},
		{Tool: mcp.NewTool("odd"), Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			r := mcp.NewToolResultStructured(map[string]any{"n": 1.5, "s": "x&y"}, "structured")
			r.Meta = mcp.NewMetaFromMap(map[string]any{"com.example/k": "v"})
			return r, nil
		}},
	}
	log := &testsupport.SyncBuffer{}
	l := startLabWithPolicies(tb, tools, map[string]string{"eq": fastPolicy}, `hide = ["secret"]`, log)
	return l, log
}

// startLabWithPolicies starts a child with tools and a Mux on it whose
// identities have policies, with serverLines in [servers.lab].
func startLabWithPolicies(tb testing.TB, tools []server.ServerTool, policies map[string]string, serverLines string, log *testsupport.SyncBuffer) *Mux {
	tb.Helper()
	child := server.NewMCPServer("lab", "1", server.WithToolCapabilities(true))
	child.AddTools(tools...)
	childHTTP := server.NewStreamableHTTPServer(child, server.WithStateful(true))
	hs := httptest.NewServer(childHTTP)
	tb.Cleanup(func() {
		_ = childHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	return runMux(tb, policies, log, func(dir string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n%s\n", dir, hs.URL+"/mcp", serverLines)
	})
}

// stdioSession is one client on Mux.ServeStdio, as the identity eq,
// talking line by line.
type stdioSession struct {
	tb     testing.TB
	in     *io.PipeWriter
	out    chan string
	served chan error
	taken  atomic.Int64
	syncs  int
}

// openSession serves a session on m, through mcp-go only when slow, and
// initializes it.
func openSession(tb testing.TB, m *Mux, slow bool) *stdioSession {
	tb.Helper()
	return openSessionAs(tb, m, "eq", slow)
}

// openSessionAs is openSession for identity.
func openSessionAs(tb testing.TB, m *Mux, identity string, slow bool) *stdioSession {
	tb.Helper()
	return openSessionWith(tb, m, identity, slow,
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// openSessionWith is openSessionAs, beginning with the lines opening.
func openSessionWith(tb testing.TB, m *Mux, identity string, slow bool, opening ...string) *stdioSession {
	tb.Helper()
	s := &stdioSession{tb: tb, out: make(chan string, 64), served: make(chan error, 1)}
	ctx := context.WithValue(context.Background(), fastPathCountKey{}, &s.taken)
	if slow {
		ctx = context.WithValue(ctx, slowPathOnlyKey{}, true)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s.in = inW
	go func() {
		s.served <- m.ServeStdio(ctx, identity, inR, outW)
		_ = outW.Close()
	}()
	go func() {
		defer close(s.out)
		r := bufio.NewReaderSize(outR, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			s.out <- line
		}
	}()
	for _, line := range opening {
		s.exchange(line)
	}
	return s
}

// exchange sends line and returns every message written because of it: its
// answer, if it is a request, and whatever else comes before the answer to
// a ping sent after it.
func (s *stdioSession) exchange(line string) []string {
	s.tb.Helper()
	var got []string
	s.send(line)
	until := func(key string) {
		timeout := time.After(testsupport.Wait)
		for {
			select {
			case msg, ok := <-s.out:
				if !ok {
					s.tb.Fatalf("the session ended waiting for the answer to %s", key)
				}
				got = append(got, msg)
				if id, ok := answerID([]byte(msg)); ok && id == key {
					return
				}
			case <-timeout:
				s.tb.Fatalf("no answer to %s after %q", key, line)
			}
		}
	}
	if key, ok := requestID([]byte(line)); ok {
		until(key)
	}
	s.syncs++
	sync := fmt.Sprintf(`"sync-%d"`, s.syncs)
	s.send(`{"jsonrpc":"2.0","id":` + sync + `,"method":"ping"}`)
	until(sync)
	return got[:len(got)-1]
}

// send writes line to the session's input.
func (s *stdioSession) send(line string) {
	s.tb.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.tb.Fatal(err)
	}
}

// close ends the session's input and waits for ServeStdio to return.
func (s *stdioSession) close() {
	s.tb.Helper()
	_ = s.in.Close()
	if err := <-s.served; err != nil {
		s.tb.Fatal(err)
	}
	for range s.out {
	}
}

var durationField = regexp.MustCompile(`"duration_ms":\d+`)

// auditSince returns the audit lines of calls written to log past offset,
// without their durations.
func auditSince(log *testsupport.SyncBuffer, offset int) []string {
	var out []string
	for l := range strings.SplitSeq(log.String()[offset:], "\n") {
		if strings.Contains(l, `"message":"call"`) {
			out = append(out, durationField.ReplaceAllString(l, ""))
		}
	}
	return out
}

// fastCases are tools/call lines of every kind; fast says whether the fast
// path takes the line (otherwise mcp-go answers it in both sessions).
var fastCases = []struct {
	line string
	fast bool
}{
	{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lab__echo","arguments":{"text":"hi"}}}`, true},
	{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"lab__echo","arguments":{"n":12345678901234567890,"s":"a\"b\u00e9<>&","deep":[{"x":[1,2,{"y":null}]}]}}}`, true},
	{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"lab__echo"}}`, true},
	{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"lab__echo","arguments":null}}`, true},
	{`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"lab__echo","arguments":[1]}}`, true},
	{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"lab__echo","arguments":"str"}}`, true},
	{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lab__echo","arguments":{"a":1,"a":2}}}`, true},
	{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"lab__nope","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x<y>&z é","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"lab__secret","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"lab__denied","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"lab__ruled","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"lab__guarded","arguments":{"ok":true}}}`, true},
	{`{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"lab__guarded","arguments":{"ok":false}}}`, true},
	{`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"lab__typed","arguments":{"n":"x"}}}`, true},
	{`{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"lab__typed","arguments":{"n":3}}}`, true},
	{`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"lab__fail","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"lab__big","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"lab__odd","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, true},
	{`{"jsonrpc":"2.0","id":123456789012345,"method":"tools/call","params":{"name":"lab__nope"}}`, true},
	{` { "params" : { "arguments" : { "a" : [ 1 , 2 ] } , "name" : "lab__echo" } , "method" : "tools/call" , "id" : 20 , "jsonrpc" : "2.0" } `, true},
	{"\t{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"tools/call\",\"params\":{\"name\":\"lab__echo\",\"arguments\":{}}}\r", true},
	// Ids the fast path leaves to mcp-go.
	{`{"jsonrpc":"2.0","id":1e3,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":-5,"method":"tools/call","params":{"name":"lab__nope","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":1234567890123456,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":"esc\"aped","method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":"\u0041","method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":"<tag>&","method":"tools/call","params":{"name":"lab__nope","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`, false},
	// Params and members the fast path leaves to mcp-go.
	{`{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"lab__echo","arguments":{},"_meta":{"progressToken":1}}}`, false},
	{`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"lab__echo","arguments":{},"x":1}}`, false},
	{`{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"Name":"lab__echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"lab__echo","name":"lab__fail"}}`, false},
	{`{"jsonrpc":"2.0","id":34,"method":"tools/call","params":{"name":"lab\u005f_echo","arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":35,"method":"tools/call","params":{"name":null}}`, false},
	{`{"jsonrpc":"2.0","id":36,"method":"tools/call","params":{"name":"lab__echo","arguments":{"n":1e400}}}`, false},
	{`{"jsonrpc":"2.0","id":37,"method":"tools/call","params":{"arguments":{}}}`, false},
	{`{"jsonrpc":"2.0","id":38,"method":"tools/call","params":{}}`, false},
	{`{"jsonrpc":"2.0","id":39,"method":"tools/call"}`, false},
	{`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":[]}`, false},
	{`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"lab__echo"},"extra":1}`, false},
	{`{"jsonrpc":"2.0","ID":42,"method":"tools/call","params":{"name":"lab__echo"}}`, false},
	{`{"jsonrpc":"1.0","id":43,"method":"tools/call","params":{"name":"lab__echo"}}`, false},
	{`{"jsonrpc":"2.0","id":44,"method":"tools\/call","params":{"name":"lab__echo"}}`, false},
	{`{"jsonrpc":"2.0","id":45,"method":"tools/call","params":{"name":"lab__echo","task":{"ttl":1000}}}`, false},
	{`{"jsonrpc":"2.0","id":46,"method":"tools/call","params":{"name":"lab__echo","requestState":"x"}}`, false},
	{`{"jsonrpc":"2.0","id":47,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}} x`, false},
	{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"lab__echo"}}`, false},
}

// modernMeta is the _meta mcp-go's client writes on every 2026-07-28
// request of a client without handlers.
const modernMeta = `{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpbench","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// modernCall is a 2026-07-28 tools/call as mcp-go's client writes it.
func modernCall(id, name, args, meta string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"_meta":` + meta + `,"arguments":` + args + `,"name":"` + name + `"}}`
}

// modernCases are 2026-07-28 tools/call lines, and a few of the other
// kinds, for a session that began with server/discover.
var modernCases = []struct {
	line string
	fast bool
}{
	{modernCall("1", "lab__echo", `{"text":"hi"}`, modernMeta), true},
	{modernCall("2", "lab__echo", `{"n":12345678901234567890,"s":"a\"b\u00e9<>&"}`, modernMeta), true},
	{modernCall("3", "lab__nope", `{}`, modernMeta), true},
	{modernCall("4", "lab__secret", `{}`, modernMeta), true},
	{modernCall("5", "lab__denied", `{}`, modernMeta), true},
	{modernCall("6", "lab__ruled", `{}`, modernMeta), true},
	{modernCall("7", "lab__guarded", `{"ok":true}`, modernMeta), true},
	{modernCall("8", "lab__guarded", `{"ok":false}`, modernMeta), true},
	{modernCall("9", "lab__typed", `{"n":"x"}`, modernMeta), true},
	{modernCall("10", "lab__fail", `{}`, modernMeta), true},
	{modernCall("11", "lab__big", `{}`, modernMeta), true},
	{modernCall("12", "lab__odd", `{}`, modernMeta), true},
	{modernCall(`"abc"`, "lab__echo", `{}`, modernMeta), true},
	{`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"lab__echo","_meta":` + modernMeta + `}}`, true},
	// Another _meta of the same kinds: decoded afresh.
	{modernCall("14", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"experimental":{"x":{"n":1.5}},"tasks":{}}}`), true},
	{modernCall("15", "lab__odd", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/clientInfo":{"name":"x<y>","version":"2","title":"T"}}`), true},
	// mcp-go reads a clientInfo or logLevel it cannot decode as none.
	{modernCall("16", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":5}`), true},
	{modernCall("44", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":7}`), true},
	// Without _meta, in the same session: an earlier era's call.
	{`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"lab__big","arguments":{}}}`, true},
	{modernCall("18", "lab__big", `{}`, modernMeta), true},
	// _meta the fast path leaves to mcp-go.
	{modernCall("30", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), false},
	{modernCall("31", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}`), false},
	{modernCall("32", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}`), false},
	{modernCall("33", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}`), false},
	{modernCall("34", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"com.example/k":1}`), false},
	{modernCall("35", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`), false},
	{modernCall("36", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}}}`), false},
	{modernCall("37", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`), false},
	{modernCall("38", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":5}`), false},
	{modernCall("39", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"experimental":{"n":1e400}}}`), false},
	{modernCall("40", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`), false},
	{modernCall("41", "lab__echo", `{}`, `{"io.modelcontextprotocol/protocolVersion":2026,"io.modelcontextprotocol/clientCapabilities":{}}`), false},
	{modernCall("42", "lab__echo", `{}`, `{}`), false},
	{modernCall("43", "lab__echo", `{}`, `null`), false},
	{`{"jsonrpc":"2.0","id":45,"method":"tools/call","params":{"name":"lab__echo","_meta":` + modernMeta + `,"_meta":` + modernMeta + `}}`, false},
	{`{"jsonrpc":"2.0","id":46,"method":"tools/call","params":{"name":"lab__echo","requestState":"x","_meta":` + modernMeta + `}}`, false},
	{`{"jsonrpc":"2.0","id":47,"method":"tools/call","params":{"name":"lab__echo","task":{"ttl":1000},"_meta":` + modernMeta + `}}`, false},
	{`{"jsonrpc":"2.0","id":48,"method":"tools/list","params":{"_meta":` + modernMeta + `}}`, false},
	{`{"jsonrpc":"2.0","id":49,"method":"initialize","params":{"_meta":` + modernMeta + `}}`, false},
}

// openModernSession is openSession for a 2026-07-28 client: server/discover
// instead of initialize.
func openModernSession(tb testing.TB, m *Mux, identity string, slow bool) *stdioSession {
	tb.Helper()
	return openSessionWith(tb, m, identity, slow,
		`{"jsonrpc":"2.0","id":"discover","method":"server/discover","params":{"_meta":`+modernMeta+`}}`)
}

// TestFastPathEquivalence sends every fast case through a session whose fast
// path is on and one that leaves everything to mcp-go, and compares what
// each wrote, byte for byte, and the audit lines; the modern cases as well,
// through sessions of a 2026-07-28 client.
func TestFastPathEquivalence(t *testing.T) {
	m, log := startFastLab(t)
	type outcome struct {
		msgs, audit []string
		taken       int64
	}
	compare := func(t *testing.T, open func(slow bool) *stdioSession, cases []struct {
		line string
		fast bool
	}) {
		run := func(slow bool) []outcome {
			s := open(slow)
			defer s.close()
			var out []outcome
			for _, c := range cases {
				offset, before := len(log.String()), s.taken.Load()
				msgs := s.exchange(c.line)
				out = append(out, outcome{msgs: msgs, audit: auditSince(log, offset), taken: s.taken.Load() - before})
			}
			return out
		}
		fast, slow := run(false), run(true)
		for i, c := range cases {
			f, s := fast[i], slow[i]
			if want := map[bool]int64{true: 1, false: 0}[c.fast]; f.taken != want {
				t.Errorf("%s: the fast path took %d (want %d)", c.line, f.taken, want)
			}
			if strings.Join(f.msgs, "") != strings.Join(s.msgs, "") {
				t.Errorf("%s:\nfast path wrote %.400q\n   mcp-go wrote %.400q", c.line, f.msgs, s.msgs)
			}
			if strings.Join(f.audit, "\n") != strings.Join(s.audit, "\n") {
				t.Errorf("%s:\nfast path audit %q\n   mcp-go audit %q", c.line, f.audit, s.audit)
			}
			if len(s.msgs) != 1 && c.fast {
				t.Errorf("%s: answered with %q", c.line, s.msgs)
			}
		}
	}
	t.Run("2025-11-25", func(t *testing.T) {
		compare(t, func(slow bool) *stdioSession { return openSession(t, m, slow) }, fastCases)
	})
	t.Run("2026-07-28", func(t *testing.T) {
		compare(t, func(slow bool) *stdioSession { return openModernSession(t, m, "eq", slow) }, modernCases)
	})
}

// TestFastPathRounds: a call of a 2026-07-28 client that declared sampling
// may take a round, and is left to mcp-go; its input-required result, the
// answer to its retry and their audit lines are the same with the fast path
// on and off (the round's requestState and input key aside). The same call
// of a client that declared nothing is the fast path's, and its child's
// sampling request is refused as mcp-go's call would have it refused.
func TestFastPathRounds(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	sampling := `{"io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	run := func(slow bool) (msgs, audit []string, taken int64) {
		s := openModernSession(t, l.m, "alice", slow)
		defer s.close()
		offset := len(l.log.String())
		first := s.exchange(modernCall("1", "st__ask", `{"what":"sampling"}`, sampling))
		var answer struct{ Result json.RawMessage }
		if len(first) != 1 || json.Unmarshal([]byte(first[0]), &answer) != nil {
			t.Fatalf("slow=%v: the first call got %q", slow, first)
		}
		ir := testsupport.ReadInputRequired(t, answer.Result)
		if ir.ResultType != "input_required" || len(ir.InputRequests) != 1 || ir.RequestState == "" {
			t.Fatalf("slow=%v: the first call got %s, want one input request", slow, first[0])
		}
		var key string
		for k := range ir.InputRequests {
			key = k
		}
		retry := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":` + sampling + `,"arguments":{"what":"sampling"},"inputResponses":{"` + key +
			`":{"role":"assistant","content":{"type":"text","text":"by hand"},"model":"m"}},"name":"st__ask","requestState":"` + ir.RequestState + `"}}`
		msgs = append(first, s.exchange(retry)...)
		msgs = append(msgs, s.exchange(modernCall("3", "st__ask", `{"what":"sampling"}`, modernMeta))...)
		audit = auditSince(l.log, offset)
		for i := range msgs {
			msgs[i] = strings.NewReplacer(ir.RequestState, "STATE", key, "KEY").Replace(msgs[i])
		}
		return msgs, audit, s.taken.Load()
	}
	fast, fastAudit, fastTaken := run(false)
	slow, slowAudit, _ := run(true)
	if fastTaken != 1 {
		t.Errorf("the fast path took %d calls (want 1, the call without sampling)", fastTaken)
	}
	if strings.Join(fast, "") != strings.Join(slow, "") {
		t.Errorf("fast path wrote %q\n   mcp-go wrote %q", fast, slow)
	}
	if strings.Join(fastAudit, "\n") != strings.Join(slowAudit, "\n") {
		t.Errorf("fast path audit %q\n   mcp-go audit %q", fastAudit, slowAudit)
	}
	if len(fast) != 3 || !strings.Contains(fast[1], `by hand`) || strings.Contains(fast[1], "input_required") ||
		!strings.Contains(fast[2], "did not declare the sampling capability") {
		t.Errorf("answers %q: want the retry's with the client's answer, and a refusal for the client without sampling", fast)
	}
}

// A fast call the client cancels ends at the child and goes unanswered;
// the end of the input waits for the answer of one in flight.
func TestFastPathCancelAndDrain(t *testing.T) {
	l := startCallLab(t, "", "")
	s := openSessionAs(t, l.m, "reader", false)
	s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"c"}}}`)
	if tag := <-l.started; tag != "c" {
		t.Fatalf("started %q", tag)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`)
	testsupport.WaitFor(t, "the cancelled call to end", func() bool { return strings.Contains(l.log.String(), `"outcome":"cancelled"`) })
	msgs := s.exchange(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"lab__search","arguments":{}}}`)
	if len(msgs) != 1 || !strings.Contains(msgs[0], `"id":8,`) {
		t.Fatalf("after the cancelled call, got %q; want the answer to 8 alone", msgs)
	}
	s.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"lab__hold","arguments":{"tag":"d"}}}`)
	if tag := <-l.started; tag != "d" {
		t.Fatalf("started %q", tag)
	}
	_ = s.in.Close()
	// The drain counts the fast call in flight, and ServeStdio waits for it.
	testsupport.WaitFor(t, "the end of the input to wait for the call", func() bool {
		return strings.Contains(l.log.String(), "stdin closed; answering the requests in flight first")
	})
	select {
	case err := <-s.served:
		t.Fatalf("ServeStdio returned (%v) with a fast call in flight", err)
	default:
	}
	close(l.releaseCh("d"))
	var answer string
	for msg := range s.out {
		if strings.Contains(msg, `"id":7,`) {
			t.Fatalf("the cancelled call was answered: %s", msg)
		}
		if strings.Contains(msg, `"id":9,`) {
			answer = msg
		}
	}
	if err := <-s.served; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, "released d") {
		t.Fatalf("the call in flight at the end of the input was answered %q", answer)
	}
	if n := s.taken.Load(); n != 3 {
		t.Fatalf("the fast path took %d calls, want 3", n)
	}
}

// FuzzFastPath holds the fast path's one scan to mcp-go's decoding: a line
// it takes is one mcp-go reads as a tools/call with the same id, name and
// arguments and nothing else that changes the call, and the answers of
// both paths are the same bytes.
func FuzzFastPath(f *testing.F) {
	for _, c := range fastCases {
		f.Add(c.line)
	}
	for _, c := range modernCases {
		f.Add(c.line)
	}
	m, _ := startFastLab(f)
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n") {
			return
		}
		if _, ok := requestID([]byte(line)); !ok {
			return
		}
		c, ok := plainCall([]byte(line))
		if !ok {
			return
		}
		if c.meta != nil {
			if c.info, ok = readMeta(c.meta); !ok {
				return
			}
		}
		var base struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			ID      any    `json:"id"`
		}
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(line), &base); err != nil {
			t.Fatalf("taken, but mcp-go cannot decode it: %v", err)
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Fatalf("taken, but mcp-go cannot decode it as a tools/call: %v", err)
		}
		var params map[string]json.RawMessage
		var top map[string]json.RawMessage
		_ = json.Unmarshal([]byte(line), &top)
		_ = json.Unmarshal(top["params"], &params)
		id, err := json.Marshal(mcp.NewRequestId(base.ID))
		args, _ := c.args.(json.RawMessage)
		switch {
		case base.JSONRPC != mcp.JSONRPC_VERSION || base.Method != string(mcp.MethodToolsCall) || base.ID == nil:
			t.Fatalf("taken, but mcp-go reads %+v", base)
		case err != nil || string(id) != string(c.id) || c.requestID().Value() != base.ID:
			t.Fatalf("taken with id %s, which mcp-go writes back as %s (%v)", c.id, id, err)
		case req.Params.Name != c.name || string(req.Params.RawArguments) != string(args):
			t.Fatalf("taken as %q %s; mcp-go reads %q %s", c.name, args, req.Params.Name, req.Params.RawArguments)
		case (req.Params.Meta != nil) != (c.info != nil) || req.Params.Task != nil || req.Params.RequestState != "" ||
			req.Params.InputResponses != nil || len(params) > map[bool]int{false: 2, true: 3}[c.meta != nil]:
			t.Fatalf("taken, but mcp-go reads more: %+v", req.Params)
		}
		if meta := req.Params.Meta; meta != nil {
			// What extractRequestProtocolInfo reads of it, and nothing
			// else a handler could see.
			info := &server.RequestProtocolInfo{Modern: mcp.IsModernProtocol(meta.ProtocolVersion()), ProtocolVersion: meta.ProtocolVersion(),
				ClientInfo: meta.ClientInfo(), ClientCapabilities: meta.ClientCapabilities(), LogLevel: meta.LogLevel()}
			if !reflect.DeepEqual(info, c.info) || meta.ProgressToken != nil {
				t.Fatalf("taken as %+v; mcp-go reads %+v from %+v", c.info, info, meta)
			}
			for k := range meta.AdditionalFields {
				if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
					t.Fatalf("taken, but its _meta holds %q", k)
				}
			}
		}
		var got [2][]string
		for i, slow := range []bool{false, true} {
			s := openSession(t, m, slow)
			got[i] = s.exchange(line)
			s.close()
			if n := s.taken.Load(); !slow && n != 1 {
				t.Fatalf("the fast path took %d calls", n)
			}
		}
		if strings.Join(got[0], "") != strings.Join(got[1], "") {
			t.Fatalf("fast path wrote %.400q\n   mcp-go wrote %.400q", got[0], got[1])
		}
	})
}

// BenchmarkCallModern is BenchmarkCall's serial echo call (100 tools) from
// a client that speaks 2026-07-28, as mcp-go's does unless told otherwise,
// with the fast path on and with every call left to mcp-go.
func BenchmarkCallModern(b *testing.B) {
	for _, path := range []string{"fast", "mcp-go"} {
		b.Run(path, func(b *testing.B) {
			bin := testsupport.EchoChildBinary(b)
			m := runMux(b, map[string]string{"bench": `allow = ["*"]`}, nil, func(policies string) string {
				return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.echo]\ncommand = %q\nargs = [\"-tools\", \"100\"]\n", policies, bin)
			})
			ctx := context.Background()
			if path == "mcp-go" {
				ctx = context.WithValue(ctx, slowPathOnlyKey{}, true)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			served := make(chan error, 1)
			go func() {
				served <- m.ServeStdio(ctx, "bench", inR, outW)
				_ = outW.Close()
			}()
			c := client.NewClient(transport.NewIO(outR, inW, nil))
			if err := c.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				_ = c.Close()
				_ = inW.Close()
				<-served
			})
			init := mcp.InitializeRequest{}
			init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
			if _, err := c.Initialize(context.Background(), init); err != nil {
				b.Fatal(err)
			}
			if v := c.ProtocolVersion(); v != mcp.ProtocolVersion20260728 {
				b.Fatalf("the client speaks %s", v)
			}
			args := map[string]any{"text": "hello"}
			b.ReportAllocs()
			for b.Loop() {
				benchCall(b, c, "echo__echo", args)
			}
		})
	}
}

// A plain call read before the first catalog is out is mcp-go's: only the
// catalog tells a tool that requires a task, which mcp-go refuses without
// one (its before-call hook waits for the catalog).
func TestFastPathWaitsForTheFirstCatalog(t *testing.T) {
	gate := make(chan struct{})
	child := server.NewMCPServer("lab", "1", server.WithToolCapabilities(true), server.WithTaskCapabilities(true, true, true))
	child.AddTool(mcp.NewTool("slow", mcp.WithTaskSupport(mcp.TaskSupportRequired)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ran"), nil
		})
	childHTTP := server.NewStreamableHTTPServer(child, server.WithStateful(true))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate // the child's first start waits for the test
		childHTTP.ServeHTTP(w, r)
	}))
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() {
		release()
		_ = childHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	root := t.TempDir()
	dir := filepath.Join(root, "policies")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "eq.toml"), []byte(`allow = ["*"]`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n", dir, hs.URL+"/mcp")
	cfg, err := config.Parse(filepath.Join(root, "mcpmux.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	store, err := policy.NewStore(cfg.Mux.PolicyDir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, store, Options{Log: zerolog.Nop()})
	m.Start(context.Background())
	t.Cleanup(m.Close)

	s := openSessionWith(t, m, "eq", false)
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	testsupport.WaitFor(t, "the session to be initialized", func() bool {
		m.sessions.mu.Lock()
		defer m.sessions.mu.Unlock()
		for cs := range m.sessions.listeners {
			if cs.Initialized() {
				return true
			}
		}
		return false
	})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lab__slow","arguments":{}}}`)
	// mcp-go answers a line that is not JSON as it reads it, so once that
	// answer is out the call's line has been read.
	s.send(`not json`)
	var got []string
	var answer string
	readUntil := func(what string, done func() bool) {
		timeout := time.After(testsupport.Wait)
		for !done() {
			select {
			case msg := <-s.out:
				got = append(got, msg)
				if id, ok := answerID([]byte(msg)); ok && id == "1" {
					answer = msg
				}
			case <-timeout:
				t.Fatalf("waiting for %s, got %q", what, got)
			}
		}
	}
	readUntil("the parse error", func() bool { return len(got) > 0 && strings.Contains(got[len(got)-1], "Parse error") })
	release()
	readUntil("the call's answer", func() bool { return answer != "" })
	if !strings.Contains(answer, "requires task augmentation") {
		t.Errorf("the call read before the first catalog was answered %s; want mcp-go's refusal", answer)
	}
	if n := s.taken.Load(); n != 0 {
		t.Errorf("the fast path took %d calls before the first catalog", n)
	}
	s.close()
}

// endedSession is an initialized ClientSession, for a fast path whose
// session has ended.
type endedSession struct{}

func (endedSession) Initialize()                                         {}
func (endedSession) Initialized() bool                                   { return true }
func (endedSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (endedSession) SessionID() string                                   { return "ended" }

// A line read once the session's context has ended (mcp-go's reader still
// waiting in Read) is not taken: mcp-go would not run it.
func TestFastPathTakesNothingOnceTheSessionEnded(t *testing.T) {
	m, log := startFastLab(t)
	var taken atomic.Int64
	h := &halfClose{idle: make(chan struct{}, 1)}
	h.writer(io.Discard)
	f := newFastPath(m, h)
	f.taken = &taken
	ctx, cancel := context.WithCancel(m.srv.WithContext(WithIdentity(context.Background(), "eq"), endedSession{}))
	f.listening(ctx)
	cancel()
	offset := len(log.String())
	if f.take([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lab__echo","arguments":{}}}`), "1") {
		f.close()
		t.Fatalf("a call read after the session ended was taken (audit %q)", auditSince(log, offset))
	}
	f.close()
	if n := taken.Load(); n != 0 {
		t.Fatalf("taken %d", n)
	}
}
