package wire

// catalogScripts are prompts, resources, templates, subscriptions and
// completion, routed to the children that own them.
func catalogScripts() []script {
	return []script{
		{name: "prompts", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.req("prompts/get", `"name":"docs__brief","arguments":{"topic":"wire","style":"short"}`)
			w.req("prompts/get", `"name":"docs__greet"`)
			w.req("prompts/get", `"name":"docs__nope"`)                 // unknown
			w.req("prompts/get", `"name":"tickets__greet"`)             // outside allow
			w.req("prompts/get", `"name":"docs__brief","arguments":{}`) // the child's own error
			w.req("prompts/get", `"name":"tickets__brief","arguments":{"topic":"t"}`)
		}},
		{name: "resources", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.req("resources/read", `"uri":"mcpmux://docs/file:///lab/readme.txt"`)
			w.req("resources/read", `"uri":"mcpmux://docs/file:///lab/pixel.png"`)
			w.req("resources/read", `"uri":"mcpmux://docs/lab://notes/alpha"`)         // a template's
			w.req("resources/read", `"uri":"mcpmux://docs/lab://items/7?fmt=json"`)    // with a query
			w.req("resources/read", `"uri":"mcpmux://docs/file:///lab/none.txt"`)      // the child has none
			w.req("resources/read", `"uri":"mcpmux://tickets/file:///lab/readme.txt"`) // outside allow_resources
			w.req("resources/read", `"uri":"mcpmux://nobody/file:///lab/readme.txt"`)  // no such server
			w.req("resources/read", `"uri":"file:///lab/readme.txt"`)                  // not an exposed URI
		}},
		{name: "completion", variants: allVariants, lab: catalogLab(""), run: func(w *W) {
			w.init()
			w.req("completion/complete", `"ref":{"type":"ref/prompt","name":"docs__brief"},"argument":{"name":"style","value":"f"}`)
			w.req("completion/complete", `"ref":{"type":"ref/resource","uri":"mcpmux://docs/lab://notes/{name}"},"argument":{"name":"name","value":"al"}`)
			w.req("completion/complete", `"ref":{"type":"ref/prompt","name":"docs__brief"},"argument":{"name":"topic","value":"x"}`) // the child's error
			w.req("completion/complete", `"ref":{"type":"ref/prompt","name":"docs__nope"},"argument":{"name":"style","value":"f"}`)
			w.req("completion/complete", `"ref":{"type":"ref/resource","uri":"mcpmux://tickets/lab://notes/{name}"},"argument":{"name":"name","value":"al"}`)
		}},
		// A 2025-11-25 session subscribes to a resource: the child's
		// resources/updated reaches it under the URI it used, the child's
		// own members kept; after unsubscribing, nothing does.
		{name: "subscribe", variants: legacyOnly, lab: catalogLab(""), run: func(w *W) {
			w.init()
			if w.hx != nil {
				w.openGet()
			}
			w.req("resources/subscribe", `"uri":"mcpmux://docs/file:///lab/readme.txt"`)
			w.callAlso("docs__touch", `{"uri":"file:///lab/readme.txt"}`, "notifications/resources/updated")
			w.req("resources/unsubscribe", `"uri":"mcpmux://docs/file:///lab/readme.txt"`)
			w.call("docs__touch", `{"uri":"file:///lab/readme.txt"}`)
			w.req("resources/subscribe", `"uri":"mcpmux://tickets/file:///lab/readme.txt"`) // outside allow_resources
			w.req("resources/subscribe", `"uri":"mcpmux://docs/file:///lab/none.txt"`)
		}},
	}
}
