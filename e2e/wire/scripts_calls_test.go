package wire

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// callScripts are tools/call and the lists: what a call is answered with
// in each case of README's "What the caller gets", and how lists page.
func callScripts() []script {
	return []script{
		{name: "lists", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.req("tools/list", "")
			w.req("prompts/list", "")
			w.req("resources/list", "")
			w.req("resources/templates/list", "")
		}},
		// page_size pages every list; nextCursor is followed to the end, and
		// a cursor mcpmux never gave is refused.
		{name: "lists_paged", variants: allVariants, lab: catalogLab("page_size = 4"), run: func(w *W) {
			w.init()
			for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
				w.pages(method)
			}
			w.req("tools/list", `"cursor":"bm90IGEgY3Vyc29y"`)
			w.req("tools/list", `"cursor":"not base64!"`)
		}},
		{name: "calls_plain", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.call("docs__echo", `{"message":"hello"}`)
			// The child's own isError result, relayed.
			w.call("docs__search", `{"query":"private"}`)
			// A result with a resource_link and an embedded resource: their
			// URIs come back as mcpmux:// ones.
			w.call("docs__link_resource", "")
			w.call("docs__echo", "")
		}},
		// Every refusal of README's table, in one session.
		{name: "calls_refused", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.call("docs__nope", `{}`)                           // unknown
			w.call("docs__crash_for_test", `{}`)                 // hidden by hide
			w.call("docs__append_note", `{"text":"x"}`)          // denied by the policy
			w.call("tickets__echo", `{"message":"x"}`)           // outside allow
			w.call("docs__pick", `{"id":1}`)                     // hidden by a rule on claims
			w.call("nope", `{}`)                                 // no server's name at all
			w.call("docs__echo", `{"message":"forbidden"}`)      // a [[rule]] on the arguments
			w.call("docs__search", `{"query":5}`)                // not what the schema says
			w.call("docs__search", `{}`)                         // a required argument missing
			w.call("docs__pick", `{}`)                           // hidden wins over invalid
			w.call("docs__search", `"public"`)                   // arguments not an object
			w.call("docs__search", `{"query":"public","q":[1]}`) // a property the schema allows
			w.send(w.line("tools/call", w.params("", `"name":"docs__search","arguments":{"query":"public","query":"private"}`)))
			w.send(w.line("tools/call", w.params("", `"name":"docs__search","arguments":{"query":"public","filter":{"a":1,"a":2}}`)))
			w.req("tools/call", `"arguments":{}`) // no name
			w.req("tools/call", `"name":5`)       // a name that is not a string
		}},
		// Results relayed byte for byte: members no spec defines, numbers
		// beyond float64 and characters a JSON encoder would escape, in the
		// child's result and in the arguments it echoes.
		{name: "calls_verbatim", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.call("docs__verbatim", "")
			w.call("docs__echo", `{"message":"<a> & </b> \u2028\u2029 \"quoted\" \\ \u0000 \ud83d\ude00 é"}`)
			w.call("docs__echo", `{"message":"<a> & \u2028 é"}`)
		}},
		// Arguments are forwarded byte for byte: hostile's echo answers with
		// the arguments as it got them.
		{name: "calls_numbers", variants: allVariants, lab: hostileLab, run: func(w *W) {
			w.init()
			w.call("h__echo", `{"big":12345678901234567890,"neg":-9007199254740993,"exp":1.0e+300,"frac":0.10000000000000000555,"zero":-0.0}`)
			w.call("h__echo", `{"nested":{"list":[1,2.50,{"k":null}]},"s":"\u00e9\n"}`)
		}},
		// A 300 KiB result, and a 300 KiB argument (the transcript shortens
		// runs of one character, keeping their length).
		{name: "calls_big", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.call("docs__echo", fmt.Sprintf(`{"message":%q}`, strings.Repeat("x", 300<<10)))
		}},
		// Request ids of every valid kind, each answered under its own id as
		// the client wrote it.
		{name: "ids", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			for _, id := range []string{`0`, `7`, `-1`, `9007199254740993`, `"s"`, `""`, `"a\"b\\c\u00e9\n"`, `"🙂"`, `1.5`} {
				w.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":%s}`, id, w.params("", callMembers("docs__echo", `{"message":"id"}`))))
			}
			for _, id := range []string{`8`, `"t"`, `"a\"b"`} {
				line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`, id)
				if params := w.params("", ""); params != "" {
					line = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/list","params":%s}`, id, params)
				}
				w.send(line)
			}
		}},
		// A child's JSON-RPC error, and a line of garbage before its
		// answer.
		{name: "calls_child_errors", variants: allVariants, lab: hostileLab, run: func(w *W) {
			w.init()
			w.call("h__rpcerror", `{}`)
			w.call("h__garbage", `{}`)
			w.call("h__echo", `{"after":"garbage"}`)
		}},
		// A call past call_timeout; the session goes on.
		{name: "calls_timeout", variants: allVariants, lab: plainLab(`call_timeout = "1s"`), run: func(w *W) {
			w.init()
			w.call("docs__slow", `{"ms":60000,"tag":"t1"}`)
			w.call("docs__echo", `{"message":"after"}`)
		}},
		// A message over max_message_bytes (over HTTP, a body over it).
		{name: "calls_oversized", variants: allVariants, lab: plainLab("\n[limits]\nmax_message_bytes = \"64KiB\""), run: func(w *W) {
			w.init()
			line := w.line("tools/call", w.params("", callMembers("docs__echo", fmt.Sprintf(`{"message":%q}`, strings.Repeat("z", 100<<10)))))
			if w.hx != nil {
				w.hx.inline("POST", line, nil)
			} else {
				w.send(line)
			}
			w.call("docs__echo", `{"message":"after"}`)
		}},
		// The rate limit: one call a second is far more than this script
		// waits, so the second call is refused whatever the machine's speed.
		{name: "calls_rate_limited", variants: allVariants, lab: plainLab("\n[limits]\nrate_limit = 0.001"), run: func(w *W) {
			w.init()
			w.call("docs__echo", `{"message":"first"}`)
			w.call("docs__echo", `{"message":"second"}`)
			w.call("docs__nope", `{}`) // unknown names are refused before the limit
		}},
	}
}

// pages lists every page of method, following nextCursor.
func (w *W) pages(method string) {
	w.t.Helper()
	cursor := ""
	for range 100 {
		members := ""
		if cursor != "" {
			members = fmt.Sprintf(`"cursor":%q`, cursor)
		}
		res := w.req(method, members)
		if cursor = res.get("result.nextCursor"); cursor == "" {
			return
		}
	}
	w.t.Fatalf("%s does not end", method)
}

// hostileTools are the hostile child's tools these scripts call.
const hostileTools = `[{"name":"echo","inputSchema":{"type":"object"}},{"name":"rpcerror","inputSchema":{"type":"object"}},{"name":"garbage","inputSchema":{"type":"object"}}]`

// hostileLab is the hostile child, h: echo answers with its arguments as
// they came, rpcerror with a JSON-RPC error, garbage with a line that is
// not JSON before its answer.
func hostileLab(t *testing.T) *ts.Lab {
	tools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(tools, []byte(hostileTools), 0o644); err != nil {
		t.Fatal(err)
	}
	lab := ts.NewLab(t, "", server(ts.Server{Alias: "h", Command: ts.HostileBinary(t), Env: map[string]string{"HOSTILE_TOOLS": tools}}))
	lab.WritePolicy(t, "reader", `allow = ["*"]`)
	return lab
}
