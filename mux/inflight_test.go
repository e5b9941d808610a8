package mux

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/internal/trafficchild"
	"github.com/mcpmux/mcpmux/mux/telemetry"
)

// The traffic lab: a Mux with two traffic children (internal/trafficchild),
// "st" a process over stdio and "ht" in process over streamable HTTP, and
// real mcp-go clients on its stdio and HTTP upstreams. alice and bob may use
// everything; carol nothing.

var trafficChildren = []string{"st", "ht"}

func startTraffic(t *testing.T) *Mux {
	t.Helper()
	return startTrafficLab(t, trafficOptions{}).m
}

// trafficOptions change the traffic lab: policies replace the identities'
// policy files (identity -> body), st adds lines to [servers.st].
type trafficOptions struct {
	policies map[string]string
	st       string
	mux      string // lines added to [mux]
	tracing  *telemetry.Tracing
}

// trafficLab is the traffic lab's Mux, its in-process child ht, the file
// the child st records in (trafficchild.ReadRecord) and mcpmux's log.
type trafficLab struct {
	m      *Mux
	ht     *trafficchild.Child
	record string
	log    *testsupport.SyncBuffer
}

func startTrafficLab(t *testing.T, o trafficOptions) *trafficLab {
	t.Helper()
	_, before := testsupport.Goroutines()
	t.Cleanup(func() { testsupport.CheckGoroutines(t, before) })
	ht := trafficchild.New(nil)
	htHTTP := server.NewStreamableHTTPServer(ht.Server, server.WithStateful(true))
	hs := httptest.NewServer(ht.Handler(htHTTP))
	t.Cleanup(func() {
		ht.Close()
		_ = htHTTP.Shutdown(context.Background())
		hs.CloseClientConnections()
		hs.Close()
	})
	bodies := map[string]string{"alice": `allow = ["*"]`, "bob": `allow = ["*"]`, "carol": `allow = []`}
	maps.Copy(bodies, o.policies)
	record := filepath.Join(t.TempDir(), "st.record")
	log := &testsupport.SyncBuffer{}
	m := runMuxWith(t, bodies, log, Options{Tracing: o.tracing}, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n%s\n\n[servers.st]\ncommand = %q\nenv = { TRAFFICCHILD_RECORD = %q }\n%s\n\n[servers.ht]\nurl = %q\nroots = [\"file:///data\"]\n",
			policies, o.mux, testsupport.TrafficBinary(t), record, o.st, hs.URL+"/mcp")
	})
	return &trafficLab{m: m, ht: ht, record: record, log: log}
}

// upstreamClient is a real client of the Mux and what it was sent.
type upstreamClient struct {
	*client.Client
	notes *testsupport.NoteLog
}

func (u *upstreamClient) received(method string) []map[string]any {
	var out []map[string]any
	for _, n := range u.notes.All() {
		if n.Method == method {
			out = append(out, n.Params.AdditionalFields)
		}
	}
	return out
}

// answers are the client's handlers: each answer names the identity.
type answers struct{ identity string }

func (a answers) CreateMessage(context.Context, mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant,
		Content: mcp.NewTextContent("sampled by " + a.identity)}, Model: "m"}, nil
}

func (a answers) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"name": a.identity}}}, nil
}

func (a answers) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///" + a.identity}}}, nil
}

// withAnswers is the client options of a client that declares sampling,
// elicitation and roots.
func withAnswers(identity string) []client.ClientOption {
	a := answers{identity}
	return []client.ClientOption{client.WithSamplingHandler(a), client.WithElicitationHandler(a), client.WithRootsHandler(a)}
}

func connect(t *testing.T, tr transport.Interface, opts []client.ClientOption) *upstreamClient {
	t.Helper()
	u := &upstreamClient{Client: client.NewClient(tr, append(opts, client.WithProtocolVersion("2025-11-25"))...)}
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	if err := u.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	u.notes = testsupport.RecordNotes(u.Client)
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := u.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return u
}

// stdioUpstream connects a client to m's stdio upstream as identity.
func stdioUpstream(t *testing.T, m *Mux, identity string, opts ...client.ClientOption) *upstreamClient {
	t.Helper()
	return stdioClient(t, m, identity, opts, connect)
}

// stdioClient serves m's stdio upstream as identity on pipes until t ends,
// and connects a client to it with dial.
func stdioClient(t *testing.T, m *Mux, identity string, opts []client.ClientOption,
	dial func(*testing.T, transport.Interface, []client.ClientOption) *upstreamClient) *upstreamClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- m.ServeStdio(context.Background(), identity, inR, outW)
		_ = outW.Close()
	}()
	u := dial(t, transport.NewIO(outR, inW, nil), opts)
	t.Cleanup(func() {
		_ = u.Close()
		_ = inW.Close()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return u
}

// httpUpstream serves m's HTTP upstream, each request as the identity its
// X-Identity header names, and returns a connect function for it.
// With listen, each client keeps a standalone GET stream open.
func httpUpstream(t *testing.T, m *Mux, listen bool) func(identity string, opts ...client.ClientOption) *upstreamClient {
	_, url := serveLab(t, m, edge.HTTPOptions{Path: "/mcp"}, func(r *http.Request) string { return r.Header.Get("X-Identity") })
	return func(identity string, opts ...client.ClientOption) *upstreamClient {
		topts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"X-Identity": identity})}
		if listen {
			topts = append(topts, transport.WithContinuousListening())
		}
		tr, err := transport.NewStreamableHTTP(url, topts...)
		if err != nil {
			t.Fatal(err)
		}
		u := connect(t, tr, opts)
		t.Cleanup(func() { _ = u.Close() })
		return u
	}
}

// callChild calls tool of child alias and returns its text.
func callChild(t *testing.T, u *upstreamClient, alias, tool string, args map[string]any, meta *mcp.Meta) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = alias + config.DefaultSeparator + tool
	req.Params.Arguments = args
	req.Params.Meta = meta
	res, err := u.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", req.Params.Name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents", req.Params.Name, len(res.Content))
	}
	return res.Content[0].(mcp.TextContent).Text
}

// progressOf returns the messages of the progress u received under token.
func progressOf(u *upstreamClient, token string) []string {
	var out []string
	for _, p := range u.received(string(mcp.MethodNotificationProgress)) {
		if p["progressToken"] == token {
			out = append(out, fmt.Sprint(p["message"]))
		}
	}
	return out
}

// TestProgressBeforeAnswer: a child that sends 50 progress notifications
// and then answers has every one of them at the client, in order and under
// the client's own token, before the answer, repeatedly, over both
// upstreams: mcpmux writes them itself at the edge (mcp-go writes its own
// notifications from another goroutine than its answers, and its HTTP
// server can drop one its forwarder holds when the answer is written). The
// child is the stdio one: an mcp-go HTTP child sends part of a call's
// progress on its standalone stream, after its answer, as it would to any
// client.
func TestProgressBeforeAnswer(t *testing.T) {
	m := startTraffic(t)
	ups := map[string]*upstreamClient{"stdio": stdioUpstream(t, m, "alice"), "http": httpUpstream(t, m, false)("alice")}
	for name, u := range ups {
		for _, alias := range []string{"st"} {
			t.Run(name+"/"+alias, func(t *testing.T) {
				for round := range 10 {
					token := fmt.Sprintf("%s-%s-%d", name, alias, round)
					tag := "r" + fmt.Sprint(round)
					if got := callChild(t, u, alias, "progress", map[string]any{"count": 50, "tag": tag},
						&mcp.Meta{ProgressToken: token}); got != "done "+tag {
						t.Fatalf("answer %q", got)
					}
					got := progressOf(u, token)
					if len(got) != 50 {
						t.Fatalf("round %d: %d progress notifications before the answer, want 50", round, len(got))
					}
					for i, msg := range got {
						if want := fmt.Sprintf("%s %d", tag, i+1); msg != want {
							t.Fatalf("round %d: progress %d is %q, want %q", round, i, msg, want)
						}
					}
				}
			})
		}
	}
}

// TestProgressNeverCrossesCalls: two HTTP sessions of two identities call at
// once with the same progress token, and each sees only its own call's
// progress (mcp-go's HTTP server may drop one now and then, see
// TestProgressBeforeAnswer); progress a child sends after its answer never
// reaches the next call.
func TestProgressNeverCrossesCalls(t *testing.T) {
	m := startTraffic(t)
	connectHTTP := httpUpstream(t, m, false)
	a, b := connectHTTP("alice"), connectHTTP("bob")
	for _, alias := range []string{"st"} {
		var wg sync.WaitGroup
		for _, u := range []*upstreamClient{a, b} {
			wg.Go(func() {
				for round := range 5 {
					callChild(t, u, alias, "progress", map[string]any{"count": 20, "tag": alias + fmt.Sprint(u == a, round)},
						&mcp.Meta{ProgressToken: "same"})
				}
			})
		}
		wg.Wait()
	}
	for _, u := range []*upstreamClient{a, b} {
		got := progressOf(u, "same")
		if len(got) == 0 || len(got) > 5*20 {
			t.Errorf("%d progress notifications, want at most %d", len(got), 5*20)
		}
		for _, msg := range got {
			if !strings.Contains(msg, fmt.Sprint(u == a)) {
				t.Errorf("progress %q reached the other session", msg)
			}
		}
	}

	s := stdioUpstream(t, m, "alice")
	callChild(t, s, "st", "progress", map[string]any{"tag": "late", "late": true}, &mcp.Meta{ProgressToken: "tok"})
	// The child sends the late progress before it handles the next call.
	callChild(t, s, "st", "progress", map[string]any{"count": 1, "tag": "next"}, &mcp.Meta{ProgressToken: "tok2"})
	if got := progressOf(s, "tok2"); len(got) != 1 || got[0] != "next 1" {
		t.Errorf("progress %q; want only the second call's", got)
	}
}
