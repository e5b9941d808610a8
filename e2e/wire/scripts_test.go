package wire

// scripts are every script TestWire runs.
func scripts() []script {
	var all []script
	all = append(all, basicScripts()...)
	all = append(all, callScripts()...)
	all = append(all, trafficScripts()...)
	all = append(all, catalogScripts()...)
	all = append(all, taskScripts()...)
	all = append(all, httpScripts()...)
	all = append(all, frameScripts()...)
	return all
}

func basicScripts() []script {
	return []script{
		{name: "handshake", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.req("ping", "")
		}},
		// What the other era's handshake gets: server/discover in a
		// 2025-11-25 session, initialize at 2026-07-28 or at a version
		// nobody speaks, a second initialize.
		{name: "handshake_mixed", variants: legacyOnly, lab: plainLab(""), run: func(w *W) {
			w.init()
			w.req("server/discover", "")
			w.send(w.line("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"again","version":"2"}}`))
			w.req("ping", "")
		}},
		{name: "handshake_versions", variants: legacyOnly, lab: plainLab(""), run: func(w *W) {
			w.send(w.line("initialize", `{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"old","version":"1"}}`))
			w.req("ping", "")
		}},
		{name: "handshake_modern_initialize", variants: legacyOnly, lab: plainLab(""), run: func(w *W) {
			w.send(w.line("initialize", `{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"new","version":"1"}}`))
			w.req("ping", "")
		}},
	}
}
