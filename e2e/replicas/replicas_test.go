// Package replicas drives several real mcpmux replicas sharing one key, in
// front of them HAProxy balancing round robin with no stickiness: a
// 2025-11-25 session and a 2026-07-28 round are answered wherever their
// requests land, and a replica killed with SIGKILL loses only what it
// owned (its sessions answer 404, and the clients initialize again).
package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

func TestMain(m *testing.M) { ts.Main(m) }

type sampler struct{}

func (sampler) CreateMessage(_ context.Context, _ mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant,
		Content: mcp.NewTextContent("sampled by the client")}, Model: "replicas-e2e"}, nil
}

// replicaLab is a lab whose child is the traffic child (progress, and
// requests of the client's during a call), run as 3 replicas.
func replicaLab(t *testing.T) (*ts.Lab, *ts.Replicas) {
	lab := ts.NewLab(t, "", ts.Server{Alias: "traffic", Command: ts.TrafficBinary(t)})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	return lab, ts.StartReplicas(t, lab, 3)
}

func sessionID(c *ts.Conn) string {
	return c.Client.GetTransport().(*transport.StreamableHTTP).GetSessionId()
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("call failed: %+v", res)
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content %+v is not text", res.Content[0])
	}
	return tc.Text
}

// A 2025-11-25 session through HAProxy: its id names one replica, and
// every request of it (tools/list, calls with progress, a call during
// which the child asks the client for sampling) is answered wherever
// round robin sends it.
func TestSessionThroughLoadBalancer(t *testing.T) {
	t.Parallel()
	lab, rs := replicaLab(t)
	lb := ts.StartHAProxy(t, lab.Dir, rs.Public)
	c := ts.ConnectHTTP(t, lb.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		Options: []client.ClientOption{client.WithSamplingHandler(sampler{})}})
	owner := rs.OwnerOf("session", sessionID(c))
	t.Logf("the session is replica %d's", owner)
	// Round robin over 3 replicas: of any 3 requests in a row, 2 land on
	// replicas that do not own the session.
	for i := range 4 {
		if names := c.ToolNames(); !slices.Contains(names, "traffic__progress") {
			t.Fatalf("tools/list %d: %v", i, names)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
		req := mcp.CallToolRequest{}
		req.Params.Name = "traffic__progress"
		req.Params.Arguments = map[string]any{"count": 3, "tag": fmt.Sprint("p", i)}
		req.Params.Meta = &mcp.Meta{ProgressToken: mcp.ProgressToken(fmt.Sprint("tok", i))}
		res, err := c.Client.CallTool(ctx, req)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		_ = text(t, res)
		for range 3 {
			if !c.Await("notifications/progress", ts.Wait) {
				t.Fatalf("call %d: progress did not reach the client", i)
			}
		}
		if got := text(t, c.MustCall("traffic__ask", map[string]any{"what": "sampling"})); !strings.Contains(got, "sampled by the client") {
			t.Fatalf("sampling round %d: %q", i, got)
		}
	}
	// Straight to each replica that does not own it: forwarded.
	for i := range rs.Public {
		if i == owner {
			continue
		}
		direct := &http.Client{}
		body := `{"jsonrpc":"2.0","id":"direct","method":"tools/list"}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+rs.Public[i]+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sessionID(c))
		req.Header.Set("Mcp-Protocol-Version", mcp.LATEST_LEGACY_PROTOCOL_VERSION)
		resp, err := direct.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("replica %d answered the session's request with %d", i, resp.StatusCode)
		}
	}
}

// The peer listener serves only what a replica forwarded.
func TestPeerListenerRefusesOthers(t *testing.T) {
	t.Parallel()
	_, rs := replicaLab(t)
	c := ts.ConnectHTTP(t, "http://"+rs.Public[0]+"/mcp", ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION})
	for name, proof := range map[string]string{"no proof": "", "a forged proof": "v1 1700000000 nonce AAAA"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+rs.Peer[0]+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sessionID(c))
		if proof != "" {
			req.Header.Set("Mcp-Mux-Peer", proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: the peer listener answered %d, not 403", name, resp.StatusCode)
		}
	}
}

func modernClient(t *testing.T, url string) *client.Client {
	return ts.ConnectHTTP(t, url, ts.HTTPClient{Version: mcp.ProtocolVersion20260728}).Client
}

func askParams(retry map[string]any) map[string]any {
	p := map[string]any{"name": "traffic__ask", "arguments": map[string]any{"what": "sampling"},
		"_meta": ts.ModernMeta(map[string]any{"sampling": map[string]any{}})}
	for k, v := range retry {
		p[k] = v
	}
	return p
}

func retryWith(first ts.InputRequired) map[string]any {
	responses := map[string]any{}
	for k := range first.InputRequests {
		responses[k] = json.RawMessage(`{"role":"assistant","content":{"type":"text","text":"sampled for the round"},"model":"m"}`)
	}
	return map[string]any{"requestState": first.RequestState, "inputResponses": responses}
}

// A 2026-07-28 round through HAProxy: its requestState names the replica
// whose child waits for the answer, and the retry is answered wherever it
// lands, also straight at a replica that does not own it.
func TestRoundOnAnotherReplica(t *testing.T) {
	t.Parallel()
	lab, rs := replicaLab(t)
	lb := ts.StartHAProxy(t, lab.Dir, rs.Public)
	c := modernClient(t, lb.URL())
	for i := range 3 {
		first := ts.ReadInputRequired(t, ts.ModernRPC(t, c, "tools/call", askParams(nil)))
		if first.ResultType != "input_required" || first.RequestState == "" {
			t.Fatalf("round %d: %+v", i, first)
		}
		owner := rs.OwnerOf("requestState", first.RequestState)
		via := c
		if i == 0 {
			via = modernClient(t, "http://"+rs.Public[(owner+1)%3]+"/mcp")
		}
		got := ts.ReadInputRequired(t, ts.ModernRPC(t, via, "tools/call", askParams(retryWith(first))))
		if got.ResultType != "complete" || !strings.Contains(got.Text(), "sampled for the round") {
			t.Fatalf("round %d (replica %d's), retried elsewhere: %+v", i, owner, got)
		}
	}
}

// A replica killed with SIGKILL: the sessions it owned answer 404, and
// their clients initialize again and go on; the sessions of the others
// are unaffected; a round it owned is retried into "requestState is
// unknown or expired". Nothing hangs: every request has ts.Wait.
func TestReplicaKilled(t *testing.T) {
	t.Parallel()
	lab, rs := replicaLab(t)
	lb := ts.StartHAProxy(t, lab.Dir, rs.Public)
	var conns []*ts.Conn
	owners := map[int]int{}
	for len(conns) < 9 || len(owners) < 2 {
		c := ts.ConnectHTTP(t, lb.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION})
		conns = append(conns, c)
		owners[rs.OwnerOf("session", sessionID(c))]++
		if len(conns) > 30 {
			t.Fatalf("30 sessions all on one replica: %v", owners)
		}
	}
	victim := rs.OwnerOf("session", sessionID(conns[0]))
	// A round the victim owns, begun on it.
	direct := modernClient(t, "http://"+rs.Public[victim]+"/mcp")
	first := ts.ReadInputRequired(t, ts.ModernRPC(t, direct, "tools/call", askParams(nil)))
	if rs.OwnerOf("requestState", first.RequestState) != victim {
		t.Fatal("a round begun on a replica is not its own")
	}

	rs.Kill(victim)

	for i, c := range conns {
		mine := rs.OwnerOf("session", sessionID(c)) == victim
		ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
		_, err := c.Client.ListTools(ctx, mcp.ListToolsRequest{})
		cancel()
		switch {
		case mine && !errors.Is(err, transport.ErrSessionTerminated):
			t.Errorf("session %d of the killed replica: %v, want 404 (session terminated)", i, err)
		case !mine && err != nil:
			t.Errorf("session %d of a live replica: %v", i, err)
		}
		if mine {
			again := ts.ConnectHTTP(t, lb.URL(), ts.HTTPClient{Version: mcp.LATEST_LEGACY_PROTOCOL_VERSION})
			if o := rs.OwnerOf("session", sessionID(again)); o == victim {
				t.Errorf("a session initialized again is the killed replica's")
			}
			_ = text(t, again.MustCall("traffic__progress", map[string]any{"count": 1}))
		}
	}
	lbClient := modernClient(t, lb.URL())
	got := ts.ReadInputRequired(t, ts.ModernRPC(t, lbClient, "tools/call", askParams(retryWith(first))))
	if !got.IsError || !strings.Contains(got.Text(), "requestState is unknown or expired") {
		t.Errorf("a retry of the killed replica's round: %+v", got)
	}
}
