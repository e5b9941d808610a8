package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

func setLevel(t *testing.T, u *upstreamClient, level mcp.LoggingLevel) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testsupport.Wait)
	defer cancel()
	req := mcp.SetLevelRequest{}
	req.Params.Level = level
	if err := u.SetLevel(ctx, req); err != nil {
		t.Fatal(err)
	}
}

// TestChildLogsTaggedAndLeveled: a child's log messages during a call reach
// the caller with logger "alias" or "alias/logger" (a stdio child's before
// the call's answer); logging/setLevel reaches every child, which then
// runs at the level asked for.
func TestChildLogsTaggedAndLeveled(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	u := stdioUpstream(t, l.m, "alice")
	for _, alias := range trafficChildren {
		callChild(t, u, alias, "log", map[string]any{"text": alias + " plain"}, nil)
		callChild(t, u, alias, "log", map[string]any{"text": alias + " named", "logger": "lg"}, nil)
		if alias == "st" {
			// Written before the answer: no wait.
			if got := logsOf(u); !slices.Equal(got, []string{"st: st plain", "st/lg: st named"}) {
				t.Errorf("before st's answers: %q", got)
			}
		}
	}
	testsupport.WaitFor(t, "ht's log messages", func() bool { return len(logsOf(u)) == 4 })
	got := logsOf(u)[2:]
	slices.Sort(got)
	if !slices.Equal(got, []string{"ht/lg: ht named", "ht: ht plain"}) {
		t.Errorf("ht's: %q", got)
	}
	for _, level := range []mcp.LoggingLevel{mcp.LoggingLevelDebug, mcp.LoggingLevelWarning} {
		setLevel(t, u, level)
		for _, alias := range trafficChildren {
			if got := callChild(t, u, alias, "level", nil, nil); got != string(level) {
				t.Errorf("after logging/setLevel %s, %s runs at %q", level, alias, got)
			}
		}
	}
}

// TestChildLogsOutsideCalls: a log message a child sends outside any call
// reaches every session whose identity may see the child, at or above the
// session's level, and no other: carol sees ht only; alice asked for
// errors only, bob for info, so the children run at info.
func TestChildLogsOutsideCalls(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{policies: map[string]string{"carol": `allow = ["ht__*"]`}})
	connectHTTP := httpUpstream(t, l.m, true)
	alice, bob, carol := connectHTTP("alice"), connectHTTP("bob"), connectHTTP("carol")
	setLevel(t, alice, mcp.LoggingLevelError)
	setLevel(t, bob, mcp.LoggingLevelInfo)
	for _, alias := range trafficChildren {
		if got := callChild(t, alice, alias, "level", nil, nil); got != "info" {
			t.Errorf("%s runs at %q, want info, the most verbose any session asked for", alias, got)
		}
	}
	// Each log is sent when the child is told the roots changed: outside
	// any call.
	logOutside := func(alias, level, text string) {
		t.Helper()
		callChild(t, alice, alias, "log", map[string]any{"level": level, "text": text, "deferred": true}, nil)
		rootsListChanged(t, alice)
	}
	has := func(u *upstreamClient, want string) bool { return slices.Contains(logsOf(u), want) }
	logOutside("st", "info", "st info")
	testsupport.WaitFor(t, "bob to get st's info", func() bool { return has(bob, "st: st info") })
	logOutside("st", "error", "st error")
	testsupport.WaitFor(t, "alice and bob to get st's error", func() bool {
		return has(alice, "st: st error") && has(bob, "st: st error")
	})
	logOutside("ht", "error", "ht error")
	testsupport.WaitFor(t, "everyone to get ht's error", func() bool {
		return has(alice, "ht: ht error") && has(bob, "ht: ht error") && has(carol, "ht: ht error")
	})
	if has(alice, "st: st info") {
		t.Error("alice got st's info, below her level")
	}
	for _, log := range logsOf(carol) {
		if strings.HasPrefix(log, "st") {
			t.Errorf("carol, who sees nothing of st, got %q", log)
		}
	}
}

// TestChildLogsBeforeSetLevel: until a session sends logging/setLevel it
// gets every log message a child chooses to send, whatever its level
// (mcp-go's own default for a session, error, would drop a warning), during
// a call and outside any, over stdio and HTTP; once it sets a level, that
// level decides. A message whose level the protocol does not define is
// never relayed.
func TestChildLogsBeforeSetLevel(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	ups := map[string]*upstreamClient{"stdio": stdioUpstream(t, l.m, "alice"), "http": httpUpstream(t, l.m, true)("bob")}
	has := func(u *upstreamClient, want string) bool { return slices.Contains(logsOf(u), want) }
	for name, u := range ups {
		for _, alias := range trafficChildren {
			for _, level := range []string{"debug", "warning"} {
				text := name + " " + level + " in a call"
				callChild(t, u, alias, "log", map[string]any{"level": level, "text": text}, nil)
				testsupport.WaitFor(t, name+" to get "+alias+"'s "+level, func() bool { return has(u, alias+": "+text) })
			}
		}
	}
	// Outside any call: to every session that may see the child.
	callChild(t, ups["stdio"], "st", "log", map[string]any{"level": "info", "text": "st info outside", "deferred": true}, nil)
	rootsListChanged(t, ups["stdio"])
	for name, u := range ups {
		testsupport.WaitFor(t, name+" to get st's info outside any call", func() bool { return has(u, "st: st info outside") })
	}

	// st is a stdio child: what it logs in a call is written before the
	// call's answer, so what is missing then never comes.
	u := ups["stdio"]
	callChild(t, u, "st", "log", map[string]any{"level": "shouting", "text": "no such level"}, nil)
	setLevel(t, u, mcp.LoggingLevelError)
	callChild(t, u, "st", "log", map[string]any{"level": "warning", "text": "warning after setLevel"}, nil)
	callChild(t, u, "st", "log", map[string]any{"level": "error", "text": "error after setLevel"}, nil)
	if got := logsOf(u); slices.Contains(got, "st: warning after setLevel") || slices.Contains(got, "st: no such level") ||
		!slices.Contains(got, "st: error after setLevel") {
		t.Errorf("stdio's logs %q: want the error after logging/setLevel error, not the warning nor the unknown level", got)
	}
}

// TestChildLogOfTwoIdentities: a log message a stdio child sends while
// calls of two identities (alice over stdio, bob over HTTP) are in flight
// at it names no call and may be either's, so it reaches neither session,
// nor any other that may see the child (carol, who has no call): it could
// carry one identity's data to another. It is not lost: mcpmux's own log
// has it, with the server, the child's level, logger and data.
func TestChildLogOfTwoIdentities(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{policies: map[string]string{"carol": `allow = ["st__*"]`}})
	alice := stdioUpstream(t, l.m, "alice")
	connectHTTP := httpUpstream(t, l.m, true)
	bob, carol := connectHTTP("bob"), connectHTTP("carol")
	callAll([]*callSpec{trafficCall(alice, "st", "two-alice", "two", 2, "", ""), trafficCall(bob, "st", "two-bob", "two", 2, "", "")})
	var logged []map[string]any
	testsupport.WaitFor(t, "mcpmux to log the two log messages", func() bool {
		logged = nil
		for _, line := range strings.Split(l.log.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["server"] == "st" && rec["child_logger"] == "traffic" {
				logged = append(logged, rec)
			}
		}
		return len(logged) == 2
	})
	var data []string
	for _, rec := range logged {
		if rec["level"] != "error" || rec["child_level"] != "error" || !strings.Contains(fmt.Sprint(rec["message"]), "not relayed") {
			t.Errorf("mcpmux logged %v", rec)
		}
		data = append(data, fmt.Sprint(rec["data"]))
	}
	slices.Sort(data)
	if !slices.Equal(data, []string{"log of two-alice", "log of two-bob"}) {
		t.Errorf("mcpmux logged the data %q", data)
	}
	// A later message of one identity's call reaches that session.
	callChild(t, alice, "st", "log", map[string]any{"text": "alice alone"}, nil)
	for name, u := range map[string]*upstreamClient{"alice": alice, "bob": bob, "carol": carol} {
		for _, got := range logsOf(u) {
			if strings.HasPrefix(got, "st/traffic: ") {
				t.Errorf("%s received %q", name, got)
			}
		}
	}
	if got := logsOf(alice); !slices.Contains(got, "st: alice alone") {
		t.Errorf("alice's logs %q lack her own call's", got)
	}
}
