// Package upstream owns mcpmux's upstream sessions: the registry of who
// holds each (the caps on how many, mcp-go's session ids, the idle sweep),
// and what belongs to one session alone (Session): its identity, its
// client's capabilities and log level, the requests mcpmux asks its client
// and waits for, its own requests in flight, its listening streams and the
// notifications mcpmux sends it outside any call, and what must happen
// when it ends. It also owns what the edges and the rest share of a
// client's request: a request mcpmux answers (Request), the same as its
// calls reach it (Attachment), and the filter that keeps mcp-go's own
// announcements from the clients. It knows nothing of children or
// catalogs: what holds something for a session (a subscription, a task)
// asks to be told of its end (Session.OnEnd).
package upstream
