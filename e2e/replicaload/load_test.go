package replicaload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// callDeadline bounds every call: one not answered within it hung.
const callDeadline = 10 * time.Second

// load is 3 replicas behind HAProxy, each with a labserver child that
// records every probe and record call it runs, and the callers.
type load struct {
	t       *testing.T
	rs      *ts.Replicas
	lb      *ts.HAProxy
	records string

	mu      sync.Mutex // guards events; taken by the test and the callers' 404s only
	events  []event    // kills and replacements, in order
	callers []*caller  // each written only by its own goroutine until the load stops
}

// event is a replica stopped: by SIGKILL, or by SIGTERM (a rolling update).
type event struct {
	replica    int
	kill       bool
	start, end time.Time // from the signal until it is back and ready
	gone       time.Time // when it was seen to have exited
}

func newLoad(t *testing.T) *load {
	records := filepath.Join(t.TempDir(), "records")
	if err := os.Mkdir(records, 0o755); err != nil {
		t.Fatal(err)
	}
	// drain_delay: from SIGTERM a replica serves on for 3 check intervals
	// with /readyz at 503, so that HAProxy has taken it out before its
	// listeners close.
	lab := ts.HTTPLab(t, "", "listen = \"127.0.0.1:0\"\ndrain_delay = \"300ms\"",
		ts.Server{Alias: "docs", Env: map[string]string{"LAB_RECORDS_DIR": records}})
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	rs := ts.StartReplicas(t, lab, 3)
	for i := range 3 {
		rs.WaitReady(i)
	}
	lb := ts.StartHAProxyChecked(t, lab.Dir, rs.Public, ts.HAProxyCheck{Path: "/readyz", Inter: 100 * time.Millisecond})
	return &load{t: t, rs: rs, lb: lb, records: records}
}

// call is one call a caller made, and how it was answered.
type call struct {
	op         string // "probe" (read-only) or "record" (a write)
	key        string // unique in the run: the answer must echo it
	start, end time.Time
	err        string // "" when answered with the child's record
	pid        int    // the child that answered
	reinits    int    // 404s of a 2025-11-25 session, each followed by initialize and the same call again
}

// caller is one client: a 2025-11-25 session (re-initialized on 404, as
// the spec says) or a 2026-07-28 client, which has no session.
type caller struct {
	name   string
	modern bool
	conn   *ts.Conn
	since  time.Time // when conn's session began
	owner  int       // the replica conn's session names, for a 2025 one
	calls  []*call
	issues []string // what went wrong beside the calls (a 404 for a session whose owner was never stopped)
}

func (l *load) connect(ctx context.Context, cl *caller) error {
	version := mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if cl.modern {
		version = mcp.ProtocolVersion20260728
	}
	var err error
	for ctx.Err() == nil {
		var c *ts.Conn
		since := time.Now()
		if c, err = ts.ConnectHTTPErr(l.t, l.lb.URL(), ts.HTTPClient{Version: version}); err == nil {
			if cl.conn != nil {
				_ = cl.conn.Client.Close()
			}
			cl.conn, cl.since = c, since
			if !cl.modern {
				if cl.owner, err = l.rs.OwnerOfErr("session", c.Client.GetTransport().(*transport.StreamableHTTP).GetSessionId()); err != nil {
					cl.issues = append(cl.issues, err.Error())
				}
			}
			return nil
		}
	}
	return fmt.Errorf("initialize: %v (%w)", err, ctx.Err())
}

// stoppedSince reports whether replica i was stopped after since.
func (l *load) stoppedSince(i int, since time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.events, func(e event) bool { return e.replica == i && e.start.After(since) })
}

// do makes one call under callDeadline. A 2025 session answered 404 did
// not run it: the caller initializes again and sends the same call.
func (l *load) do(cl *caller, c *call) {
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "docs__" + c.op
	keyArg := map[string]string{"probe": "nonce", "record": "id"}[c.op]
	req.Params.Arguments = map[string]any{keyArg: c.key, "ms": rand.IntN(120)}
	c.start = time.Now()
	defer func() { c.end = time.Now() }()
	for {
		res, err := cl.conn.Client.CallTool(ctx, req)
		switch {
		case !cl.modern && errors.Is(err, transport.ErrSessionTerminated):
			c.reinits++
			if !l.stoppedSince(cl.owner, cl.since) {
				cl.issues = append(cl.issues, fmt.Sprintf("%s: 404 for a session of replica %d, which was not stopped since it began", c.key, cl.owner))
			}
			if err := l.connect(ctx, cl); err != nil {
				c.err = err.Error()
				return
			}
			continue
		case err != nil:
			c.err = "error: " + err.Error()
		case res.IsError:
			c.err = "error result: " + ts.Text(res)
		default:
			var r ts.LabRecord
			text := ts.Text(res)
			if json.Unmarshal([]byte(text), &r) != nil || r.Op != c.op || r.Key != c.key || r.Source != "docs" || r.Pid <= 0 {
				c.err = "CROSSED: " + text
				return
			}
			c.pid = r.Pid
		}
		return
	}
}

// run puts 16 callers (8 of each era) to work, calls back to back, a third
// of them writes, while during() runs; it returns once every caller has
// stopped.
func (l *load) run(during func()) {
	for i := range 16 {
		cl := &caller{name: fmt.Sprintf("c%d", i), modern: i%2 == 1}
		ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
		err := l.connect(ctx, cl)
		cancel()
		if err != nil {
			l.t.Fatalf("%s: %v", cl.name, err)
		}
		l.callers = append(l.callers, cl)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, cl := range l.callers {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				c := &call{op: "probe", key: fmt.Sprintf("%s-%d", cl.name, n)}
				if n%3 == 0 {
					c.op = "record"
				}
				l.do(cl, c)
				cl.calls = append(cl.calls, c)
			}
		})
	}
	during()
	close(stop)
	wg.Wait()
}

// stopped runs stop on replica i and records it as an event; stop calls
// gone once the replica has exited.
func (l *load) stopped(i int, kill bool, stop func(gone func())) {
	e := event{replica: i, kill: kill, start: time.Now()}
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
	stop(func() {
		l.mu.Lock()
		l.events[len(l.events)-1].gone = time.Now()
		l.mu.Unlock()
	})
	l.mu.Lock()
	l.events[len(l.events)-1].end = time.Now()
	l.mu.Unlock()
}

// judge checks every call against the children's records. A call may fail
// only if it was in flight on a replica being killed: sent before the
// replica was seen to have exited (a dying process's listeners still take
// connections into their backlog, reset when it is gone) and not answered
// before the signal; with rolling, none may.
func (l *load) judge(rolling bool) {
	t := l.t
	byKey, torn, err := ts.ReadLabRecords(l.records)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	inFlightAtKill := func(c *call) bool {
		return slices.ContainsFunc(l.events, func(e event) bool { return e.kill && c.start.Before(e.gone) && c.end.After(e.start) })
	}
	sent := map[string]bool{}
	total, failed, reinits := 0, map[bool]int{}, 0
	for _, cl := range l.callers {
		problems = append(problems, cl.issues...)
		for _, c := range cl.calls {
			total++
			sent[c.key] = true
			reinits += c.reinits
			recs := byKey[c.key]
			if len(recs) > 1 {
				what := "ran"
				if c.op == "record" {
					what = "WRITE RAN"
				}
				problem("%s %s: %s %d times: %v", cl.name, c.key, what, len(recs), recs)
			}
			switch {
			case c.err == "" && (len(recs) != 1 || recs[0].Pid != c.pid):
				problem("%s %s: answered by pid %d, but the records say %v", cl.name, c.key, c.pid, recs)
			case strings.HasPrefix(c.err, "CROSSED"):
				problem("%s %s: %s", cl.name, c.key, c.err)
			case c.err != "" && (rolling || !inFlightAtKill(c)):
				problem("%s (modern %v) %s failed, though no replica was killed while it ran (%s to %s): %s",
					cl.name, cl.modern, c.key, c.start.Format("15:04:05.000"), c.end.Format("15:04:05.000"), c.err)
			case c.err != "":
				failed[cl.modern]++
			}
		}
	}
	for key, recs := range byKey {
		if !sent[key] {
			problem("the children recorded %q, which no caller sent: %v", key, recs)
		}
	}
	if total < 16*10 {
		problem("only %d calls in all: the load did not run", total)
	}
	if reinits == 0 {
		problem("no 2025-11-25 session was answered 404 after its replica was stopped: the stops touched no session")
	}
	t.Logf("%d calls, %d failed in flight at a kill (2025: %d, 2026: %d), %d re-initializations after 404, %d torn records, %d stops",
		total, failed[false]+failed[true], failed[false], failed[true], reinits, torn, len(l.events))
	for _, e := range l.events {
		t.Logf("replica %d stopped (kill %v) %s, gone %s, back %s", e.replica, e.kill,
			e.start.Format("15:04:05.000"), e.gone.Format("15:04:05.000"), e.end.Format("15:04:05.000"))
	}
	for i, m := range l.rs.Mux {
		select {
		case <-m.Exited():
			problem("replica %d exited by itself: %v\n%s", i, m.ExitErr(), m.Log.Text())
		default:
		}
	}
	if len(problems) > 0 {
		if len(problems) > 30 {
			problems = append(problems[:30], fmt.Sprintf("... and %d more", len(problems)-30))
		}
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
