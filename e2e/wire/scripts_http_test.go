package wire

import "fmt"

// A policy edit that takes docs__echo away from reader.
const withoutEcho = `allow = ["*"]
deny = ["docs__echo"]`

// httpScripts are what only the HTTP transport has: sessions, headers,
// listening streams.
func httpScripts() []script {
	return []script{
		// Requests naming a session mcpmux does not hold, and one deleted.
		{name: "http_sessions", variants: []variant{http2025}, lab: plainLab(""), run: func(w *W) {
			w.init()
			w.hx.inline("POST", w.line("ping", ""), map[string]string{"Mcp-Session-Id": "mcp-session-unknown"})
			w.hx.inline("GET", "", map[string]string{"Mcp-Session-Id": "mcp-session-unknown"})
			w.hx.inline("DELETE", "", map[string]string{"Mcp-Session-Id": "mcp-session-unknown"})
			w.hx.inline("GET", "", map[string]string{"Mcp-Session-Id": ""})    // none at all
			w.hx.inline("DELETE", "", map[string]string{"Mcp-Session-Id": ""}) // none at all
			w.hx.inline("POST", w.line("ping", ""), map[string]string{"Mcp-Session-Id": ""})
			w.hx.inline("DELETE", "", nil)
			w.hx.inline("POST", w.line("ping", ""), nil)
			w.hx.inline("GET", "", nil)
			w.hx.session = "" // gone: end deletes nothing
		}},
		// The request headers of each era: the protocol version header
		// missing or unknown, the 2026-07-28 Mcp-Method and Mcp-Name
		// missing or contradicting the body, a missing Accept.
		{name: "http_headers", variants: httpOnly, lab: plainLab(""), run: func(w *W) {
			w.init()
			call := func() string { return w.line("tools/call", w.params("", callMembers("docs__echo", `{"message":"h"}`))) }
			w.hx.inline("POST", call(), map[string]string{"Mcp-Protocol-Version": ""})
			w.hx.inline("POST", call(), map[string]string{"Mcp-Protocol-Version": "1999-01-01"})
			w.hx.inline("POST", call(), map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
			w.hx.inline("POST", call(), map[string]string{"Accept": "application/json"})
			w.hx.inline("POST", call(), map[string]string{"Accept": ""})
			w.hx.inline("POST", call(), map[string]string{"Content-Type": "text/plain"})
			if w.modern() {
				w.hx.inline("POST", call(), map[string]string{"Mcp-Method": ""})
				w.hx.inline("POST", call(), map[string]string{"Mcp-Method": "tools/list"})
				w.hx.inline("POST", call(), map[string]string{"Mcp-Name": "docs__search"})
				w.hx.inline("POST", call(), map[string]string{"Mcp-Protocol-Version": v2025})
			}
		}},
		// DNS-rebinding protection: a foreign Origin is refused, a loopback
		// one served.
		{name: "http_origin", variants: httpOnly, lab: plainLab(""), run: func(w *W) {
			w.init()
			call := func() string { return w.line("tools/call", w.params("", callMembers("docs__echo", `{"message":"o"}`))) }
			w.hx.inline("POST", call(), map[string]string{"Origin": "http://evil.example"})
			w.hx.inline("POST", call(), map[string]string{"Origin": "null"})
			w.hx.inline("POST", call(), map[string]string{"Origin": "http://localhost"})
			w.hx.inline("POST", call(), map[string]string{"Origin": "http://127.0.0.1"})
		}},
		// A 2025-11-25 session's GET stream gets list_changed when a policy
		// edit changes what it sees.
		{name: "http_get_stream", variants: []variant{http2025}, lab: plainLab(""), run: func(w *W) {
			w.init()
			w.openGet()
			w.policy("reader", withoutEcho)
			w.await("notifications/tools/list_changed")
			w.req("tools/list", "")
		}},
		// A 2026-07-28 client's subscriptions/listen: acknowledged on its
		// stream, which then carries list_changed after a policy edit and
		// the updates of the resources it named.
		{name: "http_listen", variants: []variant{http2026}, lab: catalogLab(""), run: func(w *W) {
			w.init()
			listen := w.begin(w.line("subscriptions/listen", w.params("", `"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["mcpmux://docs/file:///lab/readme.txt"]}`)))
			w.await("notifications/subscriptions/acknowledged")
			w.callAlso("docs__touch", `{"uri":"file:///lab/readme.txt"}`, "notifications/resources/updated")
			w.policy("reader", readerPolicy+`
[[rule]]
tools = ["docs__search"]
allow_if = 'identity == "nobody"'
`)
			w.await("notifications/tools/list_changed")
			w.hx.close(listen.label)
		}},
		// A 2026-07-28 client's subscriptions/listen over stdio: the updates
		// of the resource it named come on it; it ends with the client's
		// notifications/cancelled.
		{name: "stdio_listen", variants: []variant{stdio2026}, lab: catalogLab(""), run: func(w *W) {
			w.init()
			listen := w.begin(w.line("subscriptions/listen", w.params("", `"notifications":{"resourcesListChanged":true,"resourceSubscriptions":["mcpmux://docs/file:///lab/readme.txt","mcpmux://tickets/file:///lab/readme.txt"]}`)))
			w.await("notifications/subscriptions/acknowledged")
			w.callAlso("docs__touch", `{"uri":"file:///lab/readme.txt"}`, "notifications/resources/updated")
			w.notify(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s}}`, listen.id))
			w.finish(listen)
		}},
		// The same over stdio, where a 2026-07-28 client listens too, and a
		// 2025-11-25 session gets list_changed on stdout.
		{name: "policy_edit", variants: stdioOnly, lab: plainLab(""), run: func(w *W) {
			w.init()
			if w.modern() {
				w.begin(w.line("subscriptions/listen", w.params("", `"notifications":{"toolsListChanged":true}`)))
				w.await("notifications/subscriptions/acknowledged")
			}
			w.policy("reader", withoutEcho)
			w.await("notifications/tools/list_changed")
			w.req("tools/list", "")
			w.call("docs__echo", `{"message":"gone"}`)
		}},
	}
}

// frames are messages that are not valid requests, each sent alone in a
// session of its own (over stdio, whatever mcpmux writes until its stdout
// ends is its answer).
var frames = []struct{ name, line string }{
	{"bad_json", `{"jsonrpc":"2.0","id":5,"method":`},
	{"not_an_object", `42`},
	{"wrong_version", `{"jsonrpc":"1.0","id":5,"method":"ping"}`},
	{"no_version", `{"id":5,"method":"ping"}`},
	{"unknown_method", `{"jsonrpc":"2.0","id":5,"method":"nope/nope"}`},
	{"unknown_notification", `{"jsonrpc":"2.0","method":"notifications/nope"}`},
	{"batch", `[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`},
	{"empty_batch", `[]`},
	{"id_object", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"docs__echo","arguments":{"message":"x"}}}`},
	{"id_array", `{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"docs__echo","arguments":{"message":"x"}}}`},
	{"id_bool", `{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"docs__echo","arguments":{"message":"x"}}}`},
	{"id_null", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"docs__echo","arguments":{"message":"x"}}}`},
	{"id_null_ping", `{"jsonrpc":"2.0","id":null,"method":"ping"}`},
	{"params_array", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":["docs__echo"]}`},
	{"trailing_garbage", `{"jsonrpc":"2.0","id":5,"method":"ping"} x`},
	{"two_on_a_line", `{"jsonrpc":"2.0","id":5,"method":"ping"}{"jsonrpc":"2.0","id":6,"method":"ping"}`},
	{"blank", ` `},
	{"duplicate_id_member", `{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}`},
}

// frameScripts are one script per frame, over stdio and HTTP in a
// 2025-11-25 session.
func frameScripts() []script {
	var out []script
	for _, f := range frames {
		out = append(out, script{name: "frame_" + f.name, variants: legacyOnly, lab: plainLab(""), run: func(w *W) {
			w.init()
			if w.hx != nil {
				w.hx.inline("POST", f.line, nil)
				return
			}
			w.notify(f.line)
		}})
	}
	return out
}
