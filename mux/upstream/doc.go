// Package upstream owns mcpmux's upstream sessions: the registry of who
// holds each (the caps on how many, mcp-go's session ids, the idle sweep),
// and what belongs to one session alone: the requests mcpmux asks its
// client and waits for, its own requests in flight, its listening streams
// and the notifications mcpmux sends it outside any call, its log level.
// It also owns what the edges and the rest share of a client's request: a
// request mcpmux answers (Request), the same as its calls reach it
// (Attachment), the filter that keeps mcp-go's own announcements from the
// clients, and the marks an edge puts on a request it hands mcp-go.
// It knows nothing of children or catalogs: the multiplexer registers what
// must happen when a session ends (Registry.Ended) and reads the rest.
package upstream
