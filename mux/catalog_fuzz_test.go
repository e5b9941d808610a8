package mux

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/mux/args"
	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/policy"
)

// unstartedMux returns a Mux for a config with one stdio server "fs" that
// is never started: for the parts of mcpmux that work on what a child sent.
func unstartedMux(tb testing.TB, serverLines string) *Mux {
	tb.Helper()
	dir := tb.TempDir()
	src := "[mux]\npolicy_dir = \".\"\nmax_name_length = 24\n\n[servers.fs]\ncommand = \"never-started\"\n" + serverLines + "\n"
	cfg, err := config.Parse(filepath.Join(dir, "mcpmux.toml"), []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	store, err := policy.NewStore(dir, zerolog.Nop())
	if err != nil {
		tb.Fatal(err)
	}
	m := New(cfg, store, Options{Log: zerolog.Nop()})
	return m
}

var validExposed = regexp.MustCompile(`^fs__[A-Za-z0-9_-]+$`)

// FuzzCatalog builds a child's catalog from a fuzzed tools/list page, as
// readCatalog does, and checks what would be exposed: every tool has a
// valid, unique name within max_name_length, an inputSchema that is an
// object schema and compiled, an outputSchema that is one or none, and a
// definition that encodes; the names do not depend on the child's order.
func FuzzCatalog(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"read","inputSchema":{"type":"object"}},{"name":"write.file"},{"name":"write_file"}]}`))
	m := unstartedMux(f, "hide = [\"secret*\"]\nread_only = [\"read*\"]\ntrust_annotations = false")
	c := newChild(m, m.cfg.Servers[0])
	f.Fuzz(func(t *testing.T, page []byte) {
		if len(page) > 4<<20 {
			return // the catalog size limit has its own tests
		}
		p, err := decodePage(page, "tools")
		if err != nil {
			return // readCatalog refuses the page
		}
		build := func(tools []json.RawMessage) *catalog.ChildCatalog {
			var raw [catalog.NumKinds][]json.RawMessage
			raw[catalog.KindTool] = tools
			return c.build.Build(raw, mcp.ServerCapabilities{})
		}
		cat := build(p.Items)
		names := map[string]string{} // orig -> exposed
		taken := map[string]bool{}
		for _, tl := range cat.Tools() {
			if !validExposed.MatchString(tl.Name) || len(tl.Name) > m.cfg.Mux.MaxNameLength {
				t.Fatalf("tool %q is exposed as %q", tl.Orig, tl.Name)
			}
			if taken[tl.Name] || names[tl.Orig] != "" {
				t.Fatalf("tool %q: the name %q or the tool is exposed twice", tl.Orig, tl.Name)
			}
			taken[tl.Name], names[tl.Orig] = true, tl.Name
			var def struct {
				Name         string          `json:"name"`
				InputSchema  json.RawMessage `json:"inputSchema"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			}
			if err := json.Unmarshal(tl.Def, &def); err != nil || def.Name != tl.Name || tl.Args == nil || tl.Server != c.alias {
				t.Fatalf("tool %q is not set up: %+v (%v)", tl.Orig, tl, err)
			}
			checkObjectSchema(t, tl.Orig, "inputSchema", def.InputSchema)
			if def.OutputSchema != nil {
				checkObjectSchema(t, tl.Orig, "outputSchema", def.OutputSchema)
			}
			if tl.ReadOnly != (len(tl.Orig) >= 4 && tl.Orig[:4] == "read") {
				t.Fatalf("tool %q: readOnly is %v", tl.Orig, tl.ReadOnly)
			}
			if !json.Valid(tl.Def) {
				t.Fatalf("tool %q: its definition is not valid JSON: %s", tl.Orig, tl.Def)
			}
			// Checking arguments never panics, whatever the schema.
			args, _, levels, err := args.Object(json.RawMessage(`{"a":[1,"x",{"b":null}]}`))
			if err != nil {
				t.Fatal(err)
			}
			_ = tl.Args.Check(args, levels)
		}
		reversed := slices.Clone(p.Items)
		slices.Reverse(reversed)
		again := map[string]string{}
		for _, tl := range build(reversed).Tools() {
			again[tl.Orig] = tl.Name
		}
		// With a name listed twice, the other definition is kept, and it may
		// be refused where the first was not.
		if hasDuplicateNames(p.Items) {
			return
		}
		if !maps.Equal(names, again) {
			t.Fatalf("the names depend on the child's order:\n%v\n%v", names, again)
		}
	})
}

func hasDuplicateNames(raw []json.RawMessage) bool {
	seen := map[string]bool{}
	for _, r := range raw {
		var w struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r, &w) != nil {
			continue
		}
		if seen[w.Name] {
			return true
		}
		seen[w.Name] = true
	}
	return false
}

// checkObjectSchema fails t unless raw is a JSON object whose "type" is
// "object", as strict clients require of every tool they list.
func checkObjectSchema(t *testing.T, tool, what string, raw json.RawMessage) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil || string(bytes.TrimSpace(top["type"])) != `"object"` {
		t.Fatalf("tool %q: %s %s is not an object schema (%v)", tool, what, raw, err)
	}
}

// pipeChild plays a child on the far end of a stdio session: it answers
// every tools/call with the next result it is handed, verbatim.
type pipeChild struct {
	results chan []byte
	stop    chan struct{} // closed to end the child
	done    chan struct{} // closed when it has
}

// startPipeSession opens a session over mcp-go's stdio transport to a
// pipeChild, closed when tb ends.
func startPipeSession(tb testing.TB) (*session, *pipeChild) {
	tb.Helper()
	toMux, childOut := io.Pipe()
	childIn, fromMux := io.Pipe()
	pc := &pipeChild{results: make(chan []byte), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pc.done)
		in := bufio.NewReader(childIn)
		for {
			line, err := in.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &req) != nil || req.Method != string(mcp.MethodToolsCall) {
				continue // notifications/cancelled
			}
			var result []byte
			select {
			case result = <-pc.results:
			case <-pc.stop:
				return
			}
			msg := append([]byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`), result...)
			if _, err := childOut.Write(append(msg, "}\n"...)); err != nil {
				return
			}
		}
	}()
	tr := transport.NewIO(toMux, fromMux, nil)
	if err := tr.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	sess := newSession(config.DefaultMaxMessageBytes)
	sess.tr = tr
	tb.Cleanup(func() {
		close(pc.stop)
		_ = tr.Close()
		_ = fromMux.Close()
		_ = childOut.Close()
		<-pc.done
	})
	return sess, pc
}

// FuzzCallResult hands session.callTool a fuzzed result from the child and
// checks that it returns a result or an error, never both or neither, and
// that a result it accepts can be sent upstream and read back by a client.
func FuzzCallResult(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"text","text":"ok"}],"structuredContent":{"a":1},"isError":false}`))
	f.Add([]byte(`{"content":[{"type":"image","data":"AAAA","mimeType":"image/png"},{"type":"resource","resource":{"uri":"x:/","text":"t"}}]}`))
	sess, pc := startPipeSession(f)
	f.Fuzz(func(t *testing.T, result []byte) {
		var line bytes.Buffer
		if json.Compact(&line, result) != nil {
			return // not one JSON value: the transport drops the line (see the hostile child's tests)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Handed over once callTool has sent its request.
		go func() {
			select {
			case pc.results <- line.Bytes():
			case <-ctx.Done():
			}
		}()
		res, _, err := sess.callTool(ctx, nil, "t", json.RawMessage(`{}`))
		if ctx.Err() != nil {
			t.Fatalf("no answer to the call: %v", err)
		}
		if (res == nil) == (err == nil) {
			t.Fatalf("callTool returned %v and %v", res, err)
		}
		if err != nil {
			return
		}
		up, merr := json.Marshal(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(int64(1)), res))
		if merr != nil {
			t.Fatalf("the result %s cannot be sent upstream: %v", result, merr)
		}
		var back struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(up, &back); err != nil {
			t.Fatal(err)
		}
		if _, err := mcp.ParseCallToolResult(&back.Result); err != nil {
			t.Fatalf("the result %s is sent upstream as %s, which a client cannot read: %v", result, back.Result, err)
		}
	})
}
