package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// The shape of the load and the bounds it is judged by.
const (
	callTimeout    = 5 * time.Second
	startupTimeout = 3 * time.Second
	// callDeadline is each call's own bound, far above call_timeout: a call
	// without an answer by then hung.
	callDeadline = 4 * callTimeout
	killEvery    = 200 * time.Millisecond
	// killStreak kills in a row take mcpmux's restart backoff to 1.6 s,
	// still under startupTimeout; restUptime is past the 10 s after which
	// mcpmux starts the backoff over.
	killStreak = 5
	restUptime = 10500 * time.Millisecond
	// killPool is how many children a run has, split evenly among its
	// mcpmux processes. A streak and its rest take some 15 s, so a child
	// can take about one kill in 3 s, and it takes 16 children to have a
	// ready one at nearly every tick. minKillShare is the share of the
	// ticks that must kill one.
	killPool     = 16
	minKillShare = 0.8
	editEvery    = 500 * time.Millisecond
	// maxCallsPerCaller bounds the load in count as the duration does in
	// time.
	maxCallsPerCaller = 20000
	rssSlack          = 64 << 20
	goroutineSlack    = 16
	// maxProblemsShown keeps a failing run's report readable.
	maxProblemsShown = 25
)

// aliasNames are the children's aliases; a run uses the first ones.
var aliasNames = []string{"docs", "tickets", "wiki", "mail", "chat", "files", "notes", "calendar",
	"search", "builds", "metrics", "billing", "photos", "maps", "news", "books"}

// class is what one call's answer was.
type class string

const (
	classOK            class = "ok"
	classRefused       class = "refused (unknown tool)"
	classInterrupted   class = "interrupted"
	classUnavailable   class = "unavailable"
	classTimeoutUnsent class = "timeout, not sent"
	classTimeoutSent   class = "timeout, cancel sent"
	// Failures, whatever the records say.
	classCrossed      class = "CROSSED"
	classHung         class = "HUNG"
	classUnclassified class = "UNCLASSIFIED"
	// classMisreported is "server X refused the call": the soak's children
	// never answer with a JSON-RPC error, so mcpmux took something else
	// (a lost session) for the child's answer.
	classMisreported class = "MISREPORTED"
)

var failureClasses = []class{classCrossed, classHung, classUnclassified, classMisreported}

// families are the texts of every isError answer mcpmux gives for a call it
// let through (mux/call.go), each naming the server and/or tool of the call.
var families = []struct {
	class class
	re    *regexp.Regexp
}{
	{classInterrupted, regexp.MustCompile(`(?s)^server (?P<server>\S+) went away during the call to (?P<tool>\S+) \(.+\); the call may or may not have taken effect, and it was (not retried|retried once and interrupted again)$`)},
	{classUnavailable, regexp.MustCompile(`(?s)^server (?P<server>\S+) is unavailable: .+$`)},
	{classTimeoutUnsent, regexp.MustCompile(`^the call to (?P<tool>\S+) timed out after \S+ waiting for server (?P<server>\S+) to be ready; it was not sent$`)},
	{classTimeoutSent, regexp.MustCompile(`^the call to (?P<tool>\S+) timed out after \S+; server (?P<server>\S+) was told to cancel it$`)},
	// The refusal's result form, when the catalog changed between mcp-go's
	// look-up and mcpmux's.
	{classRefused, regexp.MustCompile(`^unknown tool: (?P<tool>\S+)$`)},
	{classMisreported, regexp.MustCompile(`(?s)^server (?P<server>\S+) refused the call to (?P<tool>\S+): .+$`)},
}

// record is a line of a labserver records file, and the answer of the call
// that wrote it (internal/labserver Record).
type record = ts.LabRecord

// call is one call a caller made, and how it was answered.
type call struct {
	caller *caller
	alias  string
	op     string // "probe" (read-only) or "record" (a write)
	key    string // the probe's nonce or the write's id: unique in the run
	ms     int
	start  time.Time // when it was sent
	class  class
	pid    int       // the child that answered, for ok
	detail string    // the answer, for anything but ok
	end    time.Time // when the answer came
}

func (c *call) tool() string { return c.alias + "__" + c.op }

func (c *call) String() string {
	return fmt.Sprintf("%s (%s) %s %s ms=%d", c.caller.name, c.caller.identity, c.tool(), c.key, c.ms)
}

// judge classifies the answer of c.
func (c *call) judge(res *mcp.CallToolResult, err error) {
	tool := c.tool()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		c.class, c.detail = classHung, fmt.Sprintf("no answer within %s (call_timeout %s)", callDeadline, callTimeout)
	case err != nil:
		c.class, c.detail = classUnclassified, "error: "+err.Error()
		if errors.Is(err, mcp.ErrInvalidParams) && strings.Contains(err.Error(), "'"+tool+"'") && strings.Contains(err.Error(), "not found") {
			c.class = classRefused
		}
	case res.IsError:
		text := ts.Text(res)
		c.class, c.detail = classUnclassified, text
		for _, f := range families {
			m := f.re.FindStringSubmatch(text)
			if m == nil {
				continue
			}
			if i := f.re.SubexpIndex("server"); i > 0 && m[i] != c.alias {
				c.class = classCrossed
				return
			}
			if i := f.re.SubexpIndex("tool"); i > 0 && m[i] != tool {
				c.class = classCrossed
				return
			}
			c.class = f.class
			if c.class == classMisreported {
				c.detail = "the child never answers with an error, yet mcpmux says: " + text
			}
			return
		}
	default:
		text := ts.Text(res)
		var r record
		if json.Unmarshal([]byte(text), &r) != nil || r.Op != c.op || r.Key != c.key || r.Source != c.alias || r.Pid <= 0 {
			c.class, c.detail = classCrossed, text
			return
		}
		c.class, c.pid = classOK, r.Pid
	}
}

// runs says how many times the children may have recorded a call that was
// answered so. A write is never re-run. A read-only call is re-run once if
// its child dies under it, and that second attempt may find the child not
// back yet: so even an "unavailable" or "not sent" one may have run once.
func (c *call) runs() (lo, hi int) {
	most, unsent := 1, 0
	if c.op == "probe" {
		most, unsent = 2, 1
	}
	switch c.class {
	case classOK:
		return 1, most
	case classRefused:
		return 0, 0
	case classUnavailable, classTimeoutUnsent:
		return 0, unsent
	default:
		return 0, most
	}
}

// caller is one source of calls: an identity on one connection to one
// mcpmux. Its calls are written only by its own goroutine.
type caller struct {
	name     string
	identity string
	client   *client.Client
	// close ends the caller's own connection, if it has one.
	close func() error
	calls []*call
}

// do makes one call, bounded by callDeadline.
func (cl *caller) do(c *call) {
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = c.tool()
	keyArg := "nonce"
	if c.op == "record" {
		keyArg = "id"
	}
	req.Params.Arguments = map[string]any{keyArg: c.key, "ms": c.ms}
	c.start = time.Now()
	res, err := cl.client.CallTool(ctx, req)
	c.end = time.Now()
	c.judge(res, err)
	cl.calls = append(cl.calls, c)
}

// target is one mcpmux process under test.
type target struct {
	name  string
	pid   int
	log   *ts.LogTap
	admin string // base URL of its /metrics
	stop  func() error
	// lister lists the tools reader sees.
	lister *client.Client

	rssBefore, rssAfter int64
	gBefore, gAfter     int
}

// goroutines reads go_goroutines from the target's /metrics.
func (tg *target) goroutines() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ts.Wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tg.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int(f), err
		}
	}
	return 0, fmt.Errorf("%s/metrics: no go_goroutines (%v)", tg.admin, sc.Err())
}

// soak is one run over one transport: the mcpmux processes under test,
// their callers, the chaos, and what was seen.
type soak struct {
	t         *testing.T
	transport string
	lab       *ts.Lab
	records   string // LAB_RECORDS_DIR
	labBin    string
	policy    *policyDir
	list      *serverList
	targets   []*target
	callers   []*caller
	aliases   []string // of the children of each mcpmux
	seed      uint64
	loadFor   time.Duration

	ticks, kills int // of the kill loop
	killed       []int
	editErr      error
	listErr      error
}

// newSoak writes a lab that gives each of the run's muxes mcpmux processes
// killPool/muxes children that keep records, with call_timeout and
// startup_timeout short enough for chaos, and its policy directory in the
// ConfigMap layout.
func newSoak(t *testing.T, transport string, muxes int) *soak {
	if testing.Short() {
		t.Skip("the chaos soak takes a while")
	}
	if *duration <= 0 {
		t.Fatalf("-soak.duration %s: want a positive duration", *duration)
	}
	_, labBin := ts.Binaries(t)
	aliases := aliasNames[:killPool/muxes]
	var servers []ts.Server
	records := filepath.Join(t.TempDir(), "records")
	if err := os.Mkdir(records, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range aliases {
		servers = append(servers, ts.Server{
			Alias: a,
			Env:   map[string]string{"LAB_RECORDS_DIR": records},
			Extra: fmt.Sprintf("startup_timeout = %q", startupTimeout),
		})
	}
	muxLines := fmt.Sprintf("call_timeout = %q", callTimeout)
	list := newServerList(nil, muxLines, servers, records)
	lab := ts.NewLab(t, muxLines, list.servers()...)
	list.lab = lab
	policy, err := newPolicyDir(lab.PolicyDir)
	if err != nil {
		t.Fatal(err)
	}
	return &soak{t: t, transport: transport, lab: lab, records: records, labBin: labBin, policy: policy,
		list: list, aliases: aliases, seed: seed()}
}

// rng returns the random source of the i-th goroutine of the run.
func (s *soak) rng(i int) *rand.Rand {
	return rand.New(rand.NewPCG(s.seed, uint64(i)))
}

// run warms up, measures, runs the chaos for d, lets mcpmux settle,
// measures again, stops every mcpmux and judges the run.
func (s *soak) run(d time.Duration) {
	s.t.Helper()
	t := s.t
	// Warm-up, before any chaos: every child is up (a start that lost the
	// race for the CPU to the others is retried) and every caller reaches
	// every child.
	for _, tg := range s.targets {
		ts.WaitFor(t, tg.name+"'s children all ready", func() bool { return len(s.readyChildren(tg)) == len(s.aliases)+len(s.list.want()) })
	}
	for _, cl := range s.callers {
		for _, a := range append(slices.Clone(s.aliases), s.list.want()...) {
			c := &call{caller: cl, alias: a, op: "probe", key: fmt.Sprintf("%s-warm-%s", cl.name, a)}
			cl.do(c)
			if c.class != classOK {
				t.Fatalf("warm-up %s: %s %s\n%s", c, c.class, c.detail, s.logs())
			}
		}
	}
	for _, tg := range s.targets {
		s.measure(tg, &tg.rssBefore, &tg.gBefore)
	}

	s.loadFor = d
	start := time.Now()
	load, stopLoad := context.WithTimeout(context.Background(), d)
	defer stopLoad()
	var chaos, callers sync.WaitGroup
	chaos.Go(func() { s.killLoop(load) })
	chaos.Go(func() { s.editLoop(load) })
	chaos.Go(func() { s.listErr = s.list.loop(load, s.rng(1)) })
	for i, cl := range s.callers {
		rng := s.rng(i + 2)
		callers.Go(func() {
			for n := 0; n < maxCallsPerCaller && load.Err() == nil; n++ {
				cl.do(s.nextCall(rng, cl, n))
			}
		})
	}
	callers.Wait()
	chaos.Wait()
	loadTook := time.Since(start)
	if s.editErr != nil {
		t.Error(s.editErr)
	}
	if s.listErr != nil {
		t.Error(s.listErr)
	}
	s.converged()

	// Settled: every call has been answered; mcpmux's goroutines come back
	// to where they were.
	for _, tg := range s.targets {
		if !ts.Settles(func() bool {
			n, err := tg.goroutines()
			return err == nil && n <= tg.gBefore+goroutineSlack
		}) {
			t.Errorf("%s: goroutines did not come back within %d of their %d at the start", tg.name, goroutineSlack, tg.gBefore)
		}
		s.measure(tg, &tg.rssAfter, &tg.gAfter)
		if tg.rssAfter > tg.rssBefore+rssSlack {
			t.Errorf("%s: RSS %d MiB after the soak, %d MiB before: more than %d MiB more",
				tg.name, tg.rssAfter>>20, tg.rssBefore>>20, rssSlack>>20)
		}
	}
	for _, cl := range s.callers {
		if cl.close != nil {
			_ = cl.close()
		}
	}
	for _, tg := range s.targets {
		if err := tg.stop(); err != nil {
			t.Errorf("%s exited with %v", tg.name, err)
		}
	}
	s.checkOrphans()
	s.judge(loadTook)
}

func (s *soak) measure(tg *target, rss *int64, g *int) {
	var err error
	if *rss, err = ts.RSS(tg.pid); err != nil {
		s.t.Fatal(err)
	}
	if *g, err = tg.goroutines(); err != nil {
		s.t.Fatal(err)
	}
}

// nextCall is the n-th call of a caller: half fast read-only probes, a
// fifth slow ones, the rest writes, which wait a little after recording so
// that kills land between a write and its answer.
func (s *soak) nextCall(rng *rand.Rand, cl *caller, n int) *call {
	c := &call{caller: cl, op: "probe"}
	if k := rng.IntN(len(s.aliases) + len(spareAliases)); k < len(s.aliases) {
		c.alias = s.aliases[k]
	} else {
		c.alias = spareAliases[k-len(s.aliases)]
	}
	switch k := rng.IntN(10); {
	case k < 5:
	case k < 7:
		c.ms = 300 + rng.IntN(1200)
	default:
		c.op, c.ms = "record", rng.IntN(400)
	}
	c.key = fmt.Sprintf("%s-%s-%d", cl.name, c.op, n)
	return c
}

// killLoop SIGKILLs a random eligible child every killEvery: the server
// process itself. A tick with no eligible child
// kills nothing.
//
// A child is eligible when it is ready and has not been killed killStreak
// times in a row already; after a streak it is left alone until it has been
// up restUptime, which resets mcpmux's restart backoff. Without that rest
// the backoff soon keeps every child down for longer than startup_timeout,
// mcpmux withdraws their tools, and the soak would go on measuring
// refusals instead of calls.
//
// So that the streaks and rests of killPool children take turns and nearly
// every tick finds a child to kill, a child in the middle of a streak is
// preferred: a new streak starts only at a tick when none of those is
// ready. Picked evenly from all, every child would be in its streak at
// once, and all of them would rest at once.
func (s *soak) killLoop(ctx context.Context) {
	rng := s.rng(0)
	tick := time.NewTicker(killEvery)
	defer tick.Stop()
	slots := map[string]*slot{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.ticks++
		now := time.Now()
		var fresh, streaking []*slot
		for _, tg := range s.targets {
			ready := s.readyChildren(tg)
			for _, a := range s.aliases {
				key := tg.name + "/" + a
				sl := slots[key]
				if sl == nil {
					sl = &slot{}
					slots[key] = sl
				}
				pid := ready[a]
				if pid != sl.pid {
					sl.pid, sl.since = pid, now
				}
				switch {
				case pid == 0:
				case sl.streak == 0 || now.Sub(sl.since) >= restUptime:
					fresh = append(fresh, sl)
				case sl.streak < killStreak:
					streaking = append(streaking, sl)
				}
			}
		}
		pick := streaking
		if len(pick) == 0 {
			pick = fresh
		}
		if len(pick) == 0 {
			continue
		}
		sl := pick[rng.IntN(len(pick))]
		if now.Sub(sl.since) >= restUptime {
			sl.streak = 0
		}
		if syscall.Kill(sl.pid, syscall.SIGKILL) == nil {
			sl.streak++
			s.kills++
			s.killed = append(s.killed, sl.pid)
		}
	}
}

// A slot is one child of one mcpmux, through its restarts, as the killer
// sees it.
type slot struct {
	pid    int       // its labserver now; 0 when none is ready
	since  time.Time // when the killer first saw pid
	streak int       // kills since it last stayed up restUptime
}

// readyChildren returns, by alias, the pid of the labserver that
// tg last reported ready; an alias whose one is gone has none.
// The pids are checked to still be the processes meant. One pass over the
// log serves every alias: the log holds a line per call, and the log tap's
// lock, held while it is read, stalls mcpmux's logging.
func (s *soak) readyChildren(tg *target) map[string]int {
	ready := map[string]int{}
	for _, l := range tg.log.Lines(ts.Msg("server ready")) {
		g, _ := l["pid"].(float64)
		ready[fmt.Sprint(l["server"])] = int(g)
	}
	pids := map[string]int{}
	for alias, pid := range ready {
		if s.isLabserver(pid) {
			pids[alias] = pid
		}
	}
	return pids
}

func (s *soak) isLabserver(pid int) bool {
	cmd := ts.Cmdline(pid)
	return len(cmd) > 0 && cmd[0] == s.labBin && ts.Alive(pid)
}

// editLoop rewrites the policy files every editEvery.
func (s *soak) editLoop(ctx context.Context) {
	tick := time.NewTicker(editEvery)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.policy.edit(n); err != nil {
			s.editErr = err
			return
		}
	}
}

// checkOrphans fails the test for any process of the run still alive once
// every mcpmux has exited: a labserver (killed or not).
func (s *soak) checkOrphans() {
	pids := slices.Clone(s.killed)
	files, _ := filepath.Glob(filepath.Join(s.records, "*.jsonl"))
	for _, f := range files {
		if pid, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".jsonl")); err == nil {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if s.isLabserver(pid) {
			s.t.Errorf("orphan: labserver pid %d outlived mcpmux", pid)
		}
	}
	for _, tg := range s.targets {
		for _, pid := range tg.log.ChildPids() {
			if s.isLabserver(pid) {
				s.t.Errorf("orphan: labserver pid %d of %s outlived it", pid, tg.name)
			}
		}
	}
}

// logs returns every target's log without the lines of calls that went
// well and the children's stderr: the timeline of kills, restarts, reloads
// and troubled calls, for a failure message.
func (s *soak) logs() string {
	var b strings.Builder
	for _, tg := range s.targets {
		fmt.Fprintf(&b, "--- %s (pid %d) log, in part:\n", tg.name, tg.pid)
		for _, l := range tg.log.Lines(func(l map[string]any) bool {
			o := l["outcome"]
			return l["message"] != "server stderr" && !(l["message"] == "call" && (o == "ok" || o == "refused"))
		}) {
			line, _ := json.Marshal(l)
			b.Write(append(line, '\n'))
		}
	}
	return b.String()
}

// readRecords reads every child's records: which pids recorded each key.
func (s *soak) readRecords() (map[string][]record, int, error) { return ts.ReadLabRecords(s.records) }

// judge checks every call against the children's records and prints the
// figures of the run.
func (s *soak) judge(took time.Duration) {
	t := s.t
	byKey, torn, err := s.readRecords()
	if err != nil {
		t.Fatal(err)
	}
	withdrawn := map[string]bool{}
	for _, l := range s.lines("server still not ready: its tools are withdrawn until it is back") {
		withdrawn[fmt.Sprint(l["server"])] = true
	}

	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if s.killShare() < minKillShare {
		problem("%d kills in the %d ticks of %s of load (%d ticks ran): %.0f%%, want at least %.0f%% of ticks to kill a ready child",
			s.kills, s.ticksDue(), s.loadFor, s.ticks, 100*s.killShare(), 100*minKillShare)
	}
	sent := map[string]*call{}
	byClass := map[class]map[string]int{}
	example := map[string]string{} // of each class and op
	total := 0
	writerWrites := map[class]int{}
	for _, cl := range s.callers {
		for _, c := range cl.calls {
			total++
			sent[c.key] = c
			if byClass[c.class] == nil {
				byClass[c.class] = map[string]int{}
			}
			byClass[c.class][c.op]++
			if k := string(c.class) + " " + c.op; c.class != classOK && example[k] == "" {
				example[k] = c.detail
			}
			if cl.identity == "writer" && c.op == "record" {
				writerWrites[c.class]++
			}
			if slices.Contains(failureClasses, c.class) {
				problem("%s: %s: %s", c, c.class, c.detail)
			}
			recs := byKey[c.key]
			if lo, hi := c.runs(); len(recs) < lo || len(recs) > hi {
				what := "ran"
				if c.op == "record" && len(recs) > 1 {
					what = "WRITE RAN"
				}
				problem("%s answered %s %q: %s %d times (want %d to %d): %v", c, c.class, c.detail, what, len(recs), lo, hi, recs)
			}
			for _, r := range recs {
				if r.Source != c.alias || r.Op != c.op {
					problem("%s: recorded by %s's %s (pid %d)", c, r.Source, r.Op, r.Pid)
				}
			}
			if c.class == classOK && !slices.ContainsFunc(recs, func(r record) bool { return r.Pid == c.pid }) {
				problem("%s: answered by pid %d, which has no record of it: %v", c, c.pid, recs)
			}
			spare := slices.Contains(spareAliases, c.alias)
			switch {
			case c.class == classOK && cl.identity == "auditor" && c.op == "record":
				problem("%s: a write went through for auditor, whose policy grants only read-only tools", c)
			case spare && c.class != classOK && c.class != classRefused:
				problem("%s: %s %q, though nothing but config edits happen to %s", c, c.class, c.detail, c.alias)
			case c.class != classRefused, c.op == "record" && cl.identity != "reader", withdrawn[c.alias],
				s.list.mayRefuse(c.alias, c.start, c.end):
			case spare:
				problem("%s: refused, though %s has been in the saved server list since well before the call", c, c.alias)
			default:
				problem("%s: refused, though %s may always call it and %s's tools were never withdrawn%s", c, cl.identity, c.alias, s.policy.lastEdit(c.end))
			}
		}
	}
	for key, recs := range byKey {
		if sent[key] == nil {
			problem("the children recorded %q, which no caller sent: %v", key, recs)
		}
	}
	if n := s.policy.edits["configmap"] + s.policy.edits["rename"] + s.policy.edits["in place"]; n >= 4 && writerWrites[classOK]+writerWrites[classRefused] >= 20 &&
		(writerWrites[classOK] == 0 || writerWrites[classRefused] == 0) {
		problem("writer's alternating grant did not show: of its writes %d were ok and %d refused over %d policy edits",
			writerWrites[classOK], writerWrites[classRefused], n)
	}
	audit := map[string]int{}
	for _, l := range s.lines("call") {
		audit[fmt.Sprint(l["outcome"])]++
	}
	if n := sumValues(audit); n != total {
		problem("mcpmux wrote %d audit lines for %d calls", n, total)
	}

	s.report(took, total, byClass, example, audit, torn, withdrawn)
	if len(problems) > 0 {
		shown := problems[:min(len(problems), maxProblemsShown)]
		t.Errorf("soak %s (seed %d; again with -run %s -soak.seed=%d): %d problems; the first %d:\n%s",
			s.transport, s.seed, t.Name(), s.seed, len(problems), len(shown), strings.Join(shown, "\n"))
		t.Logf("logs:\n%s", s.logs())
	}
}

// ticksDue is how many times the kill loop was due to kill a child.
func (s *soak) ticksDue() int { return int(s.loadFor / killEvery) }

// killShare is the share of the ticks due that killed a child.
func (s *soak) killShare() float64 { return float64(s.kills) / float64(max(1, s.ticksDue())) }

// lines returns the log lines with message msg of every target.
func (s *soak) lines(msg string) []map[string]any {
	var out []map[string]any
	for _, tg := range s.targets {
		out = append(out, tg.log.Lines(ts.Msg(msg))...)
	}
	return out
}

func sumValues[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// report prints the run's figures.
func (s *soak) report(took time.Duration, total int, byClass map[class]map[string]int, example map[string]string,
	audit map[string]int, torn int, withdrawn map[string]bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s: %s of load (seed %d), %d mcpmux, %d children each, %d callers\n",
		s.transport, took.Round(100*time.Millisecond), s.seed, len(s.targets), len(s.aliases), len(s.callers))
	fmt.Fprintf(&b, "  calls %d:", total)
	for _, cls := range slices.Sorted(maps.Keys(byClass)) {
		ops := byClass[cls]
		fmt.Fprintf(&b, " %s %d (probe %d, write %d);", cls, sumValues(ops), ops["probe"], ops["record"])
	}
	for _, k := range slices.Sorted(maps.Keys(example)) {
		fmt.Fprintf(&b, "\n    e.g. %s: %q", k, example[k])
	}
	fmt.Fprintf(&b, "\n  mcpmux audit outcomes:")
	for _, o := range slices.Sorted(maps.Keys(audit)) {
		fmt.Fprintf(&b, " %s %d", o, audit[o])
	}
	fmt.Fprintf(&b, "\n  kill ticks %d (of %d due), kills %d (%.0f%%), restarts logged %d, servers withdrawn %v, torn records %d\n",
		s.ticks, s.ticksDue(), s.kills, 100*s.killShare(), len(s.lines("server went away; restarting")), slices.Sorted(maps.Keys(withdrawn)), torn)
	fmt.Fprintf(&b, "  %s, reloads logged %d, refused %d\n", s.list.summary(),
		len(s.lines("config reloaded")), len(s.lines("config reload refused: the config in force stays")))
	fmt.Fprintf(&b, "  policy edits %d (rename %d, in place %d, configmap %d), reloads logged %d\n",
		sumValues(s.policy.edits), s.policy.edits["rename"], s.policy.edits["in place"], s.policy.edits["configmap"],
		len(s.lines("policies reloaded")))
	for _, tg := range s.targets {
		fmt.Fprintf(&b, "  %s: RSS %.1f MiB before, %.1f MiB after; goroutines %d before, %d after\n",
			tg.name, float64(tg.rssBefore)/(1<<20), float64(tg.rssAfter)/(1<<20), tg.gBefore, tg.gAfter)
	}
	// Printed rather than logged, so that it shows in the output of a
	// package that passes whenever the test binary's output is shown.
	fmt.Print(b.String())
}
