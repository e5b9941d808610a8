package mux

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpmux/mcpmux/mux/child"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
	"github.com/mcpmux/mcpmux/internal/trafficchild"
)

// countingSampler answers sampling as answers does and counts the requests.
type countingSampler struct {
	answers
	n atomic.Int32
}

func (s *countingSampler) CreateMessage(ctx context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	s.n.Add(1)
	return s.answers.CreateMessage(ctx, req)
}

// sampled returns the options of a client that answers sampling (and
// elicitation and roots) as identity, counting the sampling requests in s.
func sampled(identity string, s *countingSampler) []client.ClientOption {
	s.answers = answers{identity}
	return []client.ClientOption{client.WithSamplingHandler(s), client.WithElicitationHandler(s.answers),
		client.WithRootsHandler(s.answers)}
}

// callSpec is one tools/call made by callAll.
type callSpec struct {
	u           *upstreamClient
	alias, tool string
	args        map[string]any
	token       string // progress token; "" for none
	text        string // the answer's text
	err         error
}

// callAll makes the calls at once and waits for their answers.
func callAll(calls []*callSpec) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
			defer cancel()
			req := mcp.CallToolRequest{}
			req.Params.Name = c.alias + config.DefaultSeparator + c.tool
			req.Params.Arguments = c.args
			if c.token != "" {
				req.Params.Meta = &mcp.Meta{ProgressToken: c.token}
			}
			res, err := c.u.CallTool(ctx, req)
			switch {
			case err != nil:
				c.err = err
			case len(res.Content) != 1:
				c.err = fmt.Errorf("%d contents", len(res.Content))
			default:
				c.text = res.Content[0].(mcp.TextContent).Text
			}
		})
	}
	wg.Wait()
}

// logsOf returns the data of the log messages u received, each prefixed
// with its logger ("st/traffic: log of x").
func logsOf(u *upstreamClient) []string {
	var out []string
	for _, p := range u.received(string(mcp.MethodNotificationMessage)) {
		out = append(out, fmt.Sprintf("%v: %v", p["logger"], p["data"]))
	}
	return out
}

// trafficCall is a call of the traffic tool tagged tag that meets n-1
// others under meet (at its child) before it sends its progress, its log
// message and the request named by request ("sampling", "elicitation" or
// "" for none), and again before it answers.
func trafficCall(u *upstreamClient, alias, tag, meet string, n int, request, token string) *callSpec {
	return &callSpec{u: u, alias: alias, tool: "traffic", token: token,
		args: map[string]any{"tag": tag, "meet": meet, "n": n, "request": request}}
}

// TestTrafficReachesItsCall is the proof: two children (st over
// stdio, ht over streamable HTTP) each send progress, a log message and a
// sampling request during calls that are all in flight at once (each child
// holds its calls until all of them have arrived), and each notification
// and request reaches the call that caused it, never another.
//
// Over stdio, one client: every call gets its own progress under its own
// token and its own sampling answer; every log arrives once, tagged with
// its child's alias.
//
// Over HTTP, alice and bob, using the same progress tokens: progress
// reaches each session's own call; ht's elicitation requests reach the
// session of their call (an HTTP child that sends a request on the call's
// stream ties it to the call); st's sampling requests are refused, since a
// stdio child's request names no call and calls of two identities are in
// flight (TestRequestOfTwoIdentitiesRefused);
// a log message, which names no call either, is not sent to any session
// while calls of two identities are in flight at its child, and once only
// one identity's are, it reaches that session alone.
func TestTrafficReachesItsCall(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})

	t.Run("stdio", func(t *testing.T) {
		var s countingSampler
		u := stdioUpstream(t, l.m, "alice", sampled("alice", &s)...)
		var calls []*callSpec
		for _, alias := range trafficChildren {
			for i := range 2 {
				tag := fmt.Sprintf("stdio-%s-%d", alias, i)
				calls = append(calls, trafficCall(u, alias, tag, "stdio-"+alias, 2, "sampling", tag))
			}
		}
		callAll(calls)
		for _, c := range calls {
			tag := c.args["tag"].(string)
			if c.err != nil || !strings.HasPrefix(c.text, tag+": {") || !strings.Contains(c.text, `"text":"sampled by alice"`) {
				t.Errorf("%s: %q %v", tag, c.text, c.err)
			}
			if got := progressOf(u, tag); !slices.Equal(got, []string{tag}) {
				t.Errorf("%s: progress %q, want only its own", tag, got)
			}
		}
		if got := s.n.Load(); got != 4 {
			t.Errorf("%d sampling requests reached the client, want 4", got)
		}
		testsupport.WaitFor(t, "every call's log message", func() bool { return len(logsOf(u)) >= 4 })
		got := logsOf(u)
		slices.Sort(got)
		want := []string{"ht/traffic: log of stdio-ht-0", "ht/traffic: log of stdio-ht-1",
			"st/traffic: log of stdio-st-0", "st/traffic: log of stdio-st-1"}
		if !slices.Equal(got, want) {
			t.Errorf("log messages %q, want %q", got, want)
		}
	})

	t.Run("http", func(t *testing.T) {
		connectHTTP := httpUpstream(t, l.m, true)
		samplers := map[string]*countingSampler{"alice": {}, "bob": {}}
		ups := map[string]*upstreamClient{}
		for id, s := range samplers {
			ups[id] = connectHTTP(id, sampled(id, s)...)
		}
		// An mcp-go HTTP child sends elicitation on the call's stream, and
		// sampling on its standalone one, where it names no call.
		requestOver := map[string]string{"st": "sampling", "ht": "elicitation"}
		var calls []*callSpec
		for _, alias := range trafficChildren {
			for id, u := range ups {
				calls = append(calls, trafficCall(u, alias, id+"-"+alias, "http-"+alias, 2, requestOver[alias], "tok-"+alias))
			}
		}
		callAll(calls)
		for _, c := range calls {
			tag := c.args["tag"].(string)
			id := strings.TrimSuffix(tag, "-"+c.alias)
			want := `"name":"` + id + `"`
			if c.alias == "st" {
				want = ": error: "
			}
			if c.err != nil || !strings.HasPrefix(c.text, tag+": ") || !strings.Contains(c.text, want) {
				t.Errorf("%s: %q %v, want %s", tag, c.text, c.err, want)
			}
			if c.alias == "st" && !strings.Contains(c.text, child.ErrAmbiguousCall.Error()) {
				t.Errorf("%s: st's sampling refused with %q, want it to say %q", tag, c.text, child.ErrAmbiguousCall)
			}
			if got := progressOf(c.u, "tok-"+c.alias); !slices.Equal(got, []string{tag}) {
				t.Errorf("%s: progress %q under its token, want only its own", tag, got)
			}
		}
		for id, s := range samplers {
			if got := s.n.Load(); got != 0 {
				t.Errorf("%d sampling requests reached %s, want none", got, id)
			}
		}
		// One identity's call at a time: its log reaches its caller. It
		// comes after whatever st logged above, and no log of another
		// identity's may have reached either session by then. (ht is an
		// mcp-go HTTP child, which sends some of what it sends during a
		// call on its standalone stream, where a log message arriving after
		// the call's answer is one outside any call.)
		for _, id := range []string{"alice", "bob"} {
			callAll([]*callSpec{trafficCall(ups[id], "st", id+"-solo", "", 0, "", "")})
			testsupport.WaitFor(t, id+"'s log message", func() bool {
				return slices.Contains(logsOf(ups[id]), "st/traffic: log of "+id+"-solo")
			})
		}
		for id, u := range ups {
			for _, log := range logsOf(u) {
				if strings.HasPrefix(log, "st/") && log != "st/traffic: log of "+id+"-solo" {
					t.Errorf("%s received %q", id, log)
				}
			}
		}
	})
}

// recordOf returns what child alias of l recorded (trafficchild.Record).
func (l *trafficLab) recordOf(alias string) []string {
	if alias == "ht" {
		return l.ht.Record()
	}
	return trafficchild.ReadRecord(l.record)
}

// waitRecord waits until child alias of l has recorded a line that
// contains want, and returns it.
func (l *trafficLab) waitRecord(t *testing.T, alias, want string) string {
	t.Helper()
	var line string
	testsupport.WaitFor(t, alias+" to record "+want, func() bool {
		for _, r := range l.recordOf(alias) {
			if strings.Contains(r, want) {
				line = r
				return true
			}
		}
		return false
	})
	return line
}

// countRecord counts the lines of child alias's record that begin with
// prefix.
func (l *trafficLab) countRecord(alias, prefix string) int {
	n := 0
	for _, r := range l.recordOf(alias) {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// rootsListChanged sends notifications/roots/list_changed from u, whether
// or not it declared roots.
func rootsListChanged(t *testing.T, u *upstreamClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	err := u.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationRootsListChanged)}})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRequestOfTwoIdentitiesRefused: a child's request that names no call
// (any request of a stdio child; an mcp-go HTTP child's sampling, which it
// sends on its standalone stream), made while calls of alice (over stdio)
// and bob (over HTTP) are both in flight at the child, is refused with the
// error that says so, and reaches neither session.
func TestRequestOfTwoIdentitiesRefused(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	var sa, sb countingSampler
	alice := stdioUpstream(t, l.m, "alice", sampled("alice", &sa)...)
	bob := httpUpstream(t, l.m, true)("bob", sampled("bob", &sb)...)
	for _, alias := range trafficChildren {
		calls := []*callSpec{trafficCall(alice, alias, "alice", "two-"+alias, 2, "sampling", ""),
			trafficCall(bob, alias, "bob", "two-"+alias, 2, "sampling", "")}
		callAll(calls)
		for _, c := range calls {
			if c.err != nil || !strings.Contains(c.text, "mcpmux cannot tell which client sampling/createMessage is for: "+child.ErrAmbiguousCall.Error()) {
				t.Errorf("%s via %s: %q %v", c.args["tag"], alias, c.text, c.err)
			}
		}
	}
	if a, b := sa.n.Load(), sb.n.Load(); a != 0 || b != 0 {
		t.Errorf("sampling requests reached alice %d and bob %d times, want never", a, b)
	}
}
