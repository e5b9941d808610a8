package wire

import (
	"fmt"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// trafficLab is the traffic child (internal/trafficchild) as "traffic"
// and a labserver as "docs" (for slow), both reader's entirely.
func trafficLab(t *testing.T) *ts.Lab {
	lab := ts.NewLab(t, "", server(ts.Server{Alias: "traffic", Command: ts.TrafficBinary(t)}), server(ts.Server{Alias: "docs", Hide: labHidden}))
	lab.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"*\"]\n")
	return lab
}

// The client's answers to a child's requests, as a 2025-11-25 client
// sends them and a 2026-07-28 one puts them in inputResponses.
const (
	samplingAnswer    = `{"role":"assistant","content":{"type":"text","text":"sampled by wire"},"model":"wire-model","x-wire":{"n":12345678901234567890}}`
	elicitationAnswer = `{"action":"accept","content":{"name":"wire"}}`
	rootsAnswer       = `{"roots":[{"uri":"file:///wire","name":"wire root"}]}`
	allClientCaps     = `{"elicitation":{},"roots":{"listChanged":true},"sampling":{}}`
)

// trafficScripts are what a child does during a call: progress, log
// messages, its requests to the client; and a call the client cancels.
func trafficScripts() []script {
	return []script{
		// Progress reaches the call that asked, under the client's own token
		// (a string or a number), before the answer; a call without a token
		// gets none.
		{name: "progress", variants: allVariants, lab: trafficLab, run: func(w *W) {
			w.init()
			w.reqMeta("tools/call", `"progressToken":"p-1"`, callMembers("traffic__progress", `{"count":2,"tag":"a"}`))
			w.reqMeta("tools/call", `"progressToken":7`, callMembers("traffic__progress", `{"count":1,"tag":"b"}`))
			w.call("traffic__progress", `{"count":2,"tag":"c"}`)
			// Not here: progress the child sends right after its answer
			// (progress's late), which mcpmux sometimes drops and sometimes
			// relays ahead of the answer.
		}},
		// A child's log message during a call: before the client sets a
		// level, and after logging/setLevel (for 2026-07-28, also the level
		// a request's _meta names).
		{name: "logging", variants: allVariants, lab: trafficLab, run: func(w *W) {
			w.init()
			w.call("traffic__log", `{"level":"error","text":"an error, no level set"}`)
			w.call("traffic__log", `{"level":"debug","logger":"sub","text":"debug, no level set"}`)
			w.req("logging/setLevel", `"level":"debug"`)
			w.call("traffic__log", `{"level":"debug","logger":"sub","text":"debug after setLevel debug"}`)
			w.req("logging/setLevel", `"level":"error"`)
			w.call("traffic__log", `{"level":"info","text":"info after setLevel error"}`)
			if w.modern() {
				w.reqMeta("tools/call", `"io.modelcontextprotocol/logLevel":"debug"`, callMembers("traffic__log", `{"level":"debug","text":"debug under a _meta logLevel debug"}`))
			}
		}},
		// A slow call the client cancels: the child is told (its stderr says
		// so in mcpmux's log), and over stdio the call is never answered.
		// Over HTTP a 2026-07-28 client cancels by closing the request's
		// stream; a 2025-11-25 one sends notifications/cancelled.
		{name: "cancel", variants: allVariants, lab: trafficLab, run: func(w *W) {
			w.init()
			p := w.begin(w.line("tools/call", w.params("", callMembers("docs__slow", `{"ms":60000,"tag":"c1"}`))))
			w.lab.WaitStarted(w.t, "c1")
			if w.modern() && w.hx != nil {
				w.hx.close(p.label)
			} else {
				w.notify(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"the user gave up"}}`, p.id))
			}
			w.log.WaitLine(w.t, "the child's slow call to end", ts.Msg("server stderr", "stderr", "labserver docs slow c1 cancelled"))
			if w.hx != nil && !w.modern() {
				w.finish(p)
			}
			// The session goes on.
			w.call("docs__slow", `{"ms":0,"tag":"c2"}`)
		}},
		// A 2025-11-25 client that declared sampling, elicitation and roots
		// is asked by mcpmux on the child's behalf, under mcpmux's own
		// request ids; its answers reach the child, which answers the call
		// with what it got. Over HTTP, sampling and roots come down the
		// session's GET stream, elicitation down the call's own.
		// Over stdio, mcpmux asks a client that declared roots for them once
		// it is initialized.
		{name: "relayed_requests", variants: legacyOnly, lab: trafficLab, run: func(w *W) {
			w.withCaps(allClientCaps)
			w.reply("sampling/createMessage", samplingAnswer)
			w.reply("elicitation/create", elicitationAnswer)
			w.reply("roots/list", rootsAnswer)
			w.init()
			if w.hx != nil {
				w.openGet()
			} else {
				w.await("roots/list")
			}
			w.call("traffic__ask", `{"what":"sampling"}`)
			w.call("traffic__ask", `{"what":"elicitation"}`)
			w.call("traffic__ask", `{"what":"roots"}`)
		}},
		// The client's notifications/roots/list_changed reaches every child:
		// the traffic child then logs outside any call (a log message it was
		// told to defer) and asks for roots outside any call, which over
		// stdio mcpmux asks the client, and over HTTP answers from the
		// config.
		{name: "roots_changed", variants: legacyOnly, lab: trafficLab, run: func(w *W) {
			w.withCaps(allClientCaps)
			w.reply("roots/list", rootsAnswer)
			w.init()
			if w.hx != nil {
				w.openGet()
			} else {
				w.await("roots/list")
			}
			w.call("traffic__log", `{"level":"error","text":"outside any call","deferred":true}`)
			w.notify(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
			if w.hx != nil {
				w.await("notifications/message")
			} else {
				w.awaitAnyOrder("notifications/message", "roots/list")
			}
		}},
		// A client that did not declare the capabilities: the child is told
		// it is missing.
		{name: "relayed_requests_undeclared", variants: allVariants, lab: trafficLab, run: func(w *W) {
			w.init()
			w.call("traffic__ask", `{"what":"sampling"}`)
			w.call("traffic__ask", `{"what":"elicitation"}`)
			w.call("traffic__ask", `{"what":"roots"}`)
		}},
		// A 2026-07-28 client is asked with input-required results: each of
		// the child's requests in inputRequests with a requestState, which
		// the retry carries back with the answers, for a tool (three
		// rounds), a prompt and a resource; a used requestState is refused.
		{name: "rounds", variants: modernOnly, lab: trafficLab, run: func(w *W) {
			w.withCaps(allClientCaps)
			w.init()
			answers := map[string]string{"sampling/createMessage": samplingAnswer, "elicitation/create": elicitationAnswer, "roots/list": rootsAnswer}
			first := w.reqMeta("tools/call", `"progressToken":"r-1"`, callMembers("traffic__asks", `{"tag":"r1","rounds":"sampling/elicitation/roots"}`))
			var used string
			for res, rounds := first, 0; res.get("result.resultType") == "input_required"; rounds++ {
				if rounds > 3 {
					w.t.Fatal("more rounds than the child asks for")
				}
				state := res.get("result.requestState")
				used = state
				res = w.reqMeta("tools/call", `"progressToken":"r-1"`, callMembers("traffic__asks", `{"tag":"r1","rounds":"sampling/elicitation/roots"}`)+
					fmt.Sprintf(`,"inputResponses":%s,"requestState":%q`, inputResponses(res, answers), state))
			}
			w.req("tools/call", callMembers("traffic__asks", `{"tag":"r1","rounds":"sampling/elicitation/roots"}`)+fmt.Sprintf(`,"inputResponses":{},"requestState":%q`, used))

			res := w.req("prompts/get", `"name":"traffic__asks","arguments":{"tag":"p1","rounds":"roots"}`)
			w.req("prompts/get", `"name":"traffic__asks","arguments":{"tag":"p1","rounds":"roots"}`+
				fmt.Sprintf(`,"inputResponses":%s,"requestState":%q`, inputResponses(res, answers), res.get("result.requestState")))
			res = w.req("resources/read", `"uri":"mcpmux://traffic/traffic://asks/r2?rounds=sampling"`)
			w.req("resources/read", `"uri":"mcpmux://traffic/traffic://asks/r2?rounds=sampling"`+
				fmt.Sprintf(`,"inputResponses":%s,"requestState":%q`, inputResponses(res, answers), res.get("result.requestState")))
			w.req("resources/read", `"uri":"mcpmux://traffic/traffic://asks/r2?rounds=sampling","requestState":"bm8gc3VjaCBzdGF0ZQ"`)
		}},
	}
}

// inputResponses answers each of an input-required result's requests with
// answers[its method], as JSON.
func inputResponses(res *msg, answers map[string]string) string {
	var parts []string
	for _, k := range res.keys("result.inputRequests") {
		parts = append(parts, fmt.Sprintf("%q:%s", k, answers[res.get("result.inputRequests."+k+".method")]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
