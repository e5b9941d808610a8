package calls

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// instructionsLab has three children in this config order: tickets and
// docs with instructions, plain without.
func instructionsLab(t *testing.T) *ts.Lab {
	t.Helper()
	return ts.NewLab(t, "",
		ts.Server{Alias: "tickets", Env: map[string]string{"LAB_INSTRUCTIONS": "Search before filing a ticket."}},
		ts.Server{Alias: "plain"},
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_INSTRUCTIONS": "Cite the page.\nQuote it exactly."}},
	)
}

const (
	ticketsSection = "## tickets\n\nSearch before filing a ticket."
	docsSection    = "## docs\n\nCite the page.\nQuote it exactly."
)

// TestInstructionsPerAlias: mcpmux's initialize (over stdio and HTTP) and a
// 2026-07-28 client's server/discover carry the instructions of every
// child the caller's policy lets it see anything of, each in a section
// under a heading naming its alias, in config order; a child without
// instructions has no section, and a caller who sees nothing of any child
// gets no instructions.
func TestInstructionsPerAlias(t *testing.T) {
	t.Parallel()
	both := ticketsSection + "\n\n" + docsSection
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		lab := instructionsLab(t)
		lab.WritePolicy(t, "reader", `allow = ["*"]`)
		if got := ts.StartMux(t, lab).Init.Instructions; got != both {
			t.Errorf("initialize instructions:\n%q\nwant\n%q", got, both)
		}
		if got := ts.StartMuxModern(t, lab).Init.Instructions; got != both {
			t.Errorf("server/discover instructions:\n%q\nwant\n%q", got, both)
		}
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		lab := instructionsLab(t)
		cases := []struct{ identity, policy, want string }{
			{"all", `allow = ["*"]`, both},
			{"docs", `allow = ["docs__*"]`, docsSection},
			{"resources", `allow_resources = ["tickets"]`, ""}, // tickets offers no resources
			{"none", `allow = []`, ""},
		}
		up := `listen = "127.0.0.1:0"`
		for _, c := range cases {
			lab.WritePolicy(t, c.identity, c.policy)
			up += ts.TokenEntry(c.identity, "sha256", ts.SHA256Hex(ts.FidelityToken(c.identity)))
		}
		lab.AddUpstream(t, up)
		h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
		for _, c := range cases {
			for _, version := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, ""} {
				conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.FidelityToken(c.identity), Version: version, Log: h.Log})
				if got := conn.Init.Instructions; got != c.want {
					t.Errorf("%s (protocol %q): instructions\n%q\nwant\n%q", c.identity, conn.ProtocolVersion(), got, c.want)
				}
			}
		}
	})
}

// gatedLab has one child, docs, with tools, prompts and resources, that
// starts serving only once the test creates the file gate.
func gatedLab(t *testing.T) (lab *ts.Lab, gate string) {
	t.Helper()
	gate = filepath.Join(t.TempDir(), "open")
	lab = ts.NewLab(t, "", ts.Server{Alias: "docs", Env: map[string]string{"LAB_START_GATE": gate, "LAB_FIDELITY": "1"}})
	lab.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"*\"]")
	return lab, gate
}

// openGate lets the gated child start once mcpmux's handshake is waiting
// for it, so that the first catalog is published while initialize is
// being answered.
func openGate(t *testing.T, log *ts.LogTap, gate string) {
	t.Helper()
	log.WaitLine(t, "the handshake to wait for the first start", ts.Msg("the client's handshake waits for the servers' first start"))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

const rawInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawMessage is one message mcpmux wrote: its id (raw) and method.
type rawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func decodeRaw(t *testing.T, line []byte) rawMessage {
	t.Helper()
	var m rawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("mcpmux wrote %q: %v", line, err)
	}
	return m
}

// TestNothingBeforeTheInitializeAnswer: with a child that becomes ready
// while mcpmux's stdio initialize waits for the first catalog, the first
// thing mcpmux writes is the initialize answer, and the catalog it was
// complete with is never announced with a list_changed (it was, as tools,
// prompts and resources list_changed, often before the answer); a change
// after the answer is.
func TestNothingBeforeTheInitializeAnswer(t *testing.T) {
	t.Parallel()
	lab, gate := gatedLab(t)
	m := ts.StartRawMux(t, lab)
	m.Write(t, []byte(rawInitialize+"\n"))
	openGate(t, m.Log, gate)
	first := m.Line(t)
	if string(decodeRaw(t, first).ID) != "1" {
		t.Errorf("mcpmux wrote %s before its initialize answer", first)
	}
	lines := [][]byte{first}
	m.Write(t, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n"+
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"docs__toggle_resource","arguments":{}}}`+"\n"))
	// The change of the resources comes after every notification mcpmux
	// had queued before (mcp-go writes them in order), and a catalog's
	// list_changed go out as tools, prompts, resources: once the resources'
	// is in, any of the first catalog's is too.
	answered, changed := false, false
	for !answered || !changed {
		line := m.Line(t)
		lines = append(lines, line)
		msg := decodeRaw(t, line)
		answered = answered || string(msg.ID) == "3"
		changed = changed || msg.Method == string(mcp.MethodNotificationResourcesListChanged)
	}
	for _, line := range lines {
		if method := decodeRaw(t, line).Method; strings.HasSuffix(method, "/list_changed") && method != string(mcp.MethodNotificationResourcesListChanged) {
			t.Errorf("mcpmux wrote %s for the catalog its initialize answer was complete with:\n%s", method, bytes.Join(lines, nil))
		}
	}
}

// TestNothingBeforeTheInitializeAnswerOverHTTP is the same over HTTP: the
// initialize answer is a JSON body that holds only the answer, and a change
// after it reaches the session's GET stream.
func TestNothingBeforeTheInitializeAnswerOverHTTP(t *testing.T) {
	t.Parallel()
	lab, gate := gatedLab(t)
	lab.AddUpstream(t, `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(ts.FidelityToken("reader"))))
	h := ts.StartHTTPMux(t, lab, ts.HTTPStart{})
	post := func(sid, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, h.URL(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+ts.FidelityToken("reader"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = res.Body.Close() })
		return res
	}
	answer := make(chan *http.Response, 1)
	go func() { answer <- post("", rawInitialize) }() // post's Fatal only ends the test from its own goroutine
	openGate(t, h.Log, gate)
	var res *http.Response
	select {
	case res = <-answer:
	case <-time.After(ts.Wait):
		t.Fatal("no initialize answer")
	}
	body, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); ct != "application/json" || string(decodeRaw(t, bytes.TrimSpace(body)).ID) != "1" {
		t.Fatalf("initialize answered %s %q", ct, body)
	}
	sid := res.Header.Get("Mcp-Session-Id")
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.URL(), nil)
	req.Header.Set("Authorization", "Bearer "+ts.FidelityToken("reader"))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"docs__notify_changed","arguments":{}}}`)
	sc := bufio.NewScanner(stream.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && decodeRaw(t, []byte(data)).Method == string(mcp.MethodNotificationToolsListChanged) {
			return
		}
	}
	t.Fatalf("the GET stream ended without tools/list_changed: %v", sc.Err())
}

// TestInstructionsOfServerEverything: server-everything's initialize
// carries instructions meant for the model; through mcpmux they come under
// the heading of its alias, as the child sent them.
func TestInstructionsOfServerEverything(t *testing.T) {
	t.Parallel()
	node, entry := ts.EverythingCommand(t)
	direct := client.NewClient(transport.NewStdio(node, nil, entry), client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if err := direct.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-direct", Version: "1"}
	res, err := direct.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if res.Instructions == "" {
		t.Fatal("server-everything sent no instructions: the test needs some")
	}
	lab := ts.NewLab(t, "", ts.Server{Alias: "everything", Command: node, Args: []string{entry}, Extra: `startup_timeout = "30s"`})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	if got, want := ts.StartMux(t, lab).Init.Instructions, "## everything\n\n"+res.Instructions; got != want {
		t.Errorf("through mcpmux:\n%q\nwant\n%q", got, want)
	}
}
