// Package upstream owns mcpmux's upstream sessions: the registry of who
// holds each (the caps on how many, mcp-go's session ids, the idle sweep),
// and what belongs to one session alone: the requests mcpmux asks its
// client and waits for, its own requests in flight, its listening streams
// and the notifications mcpmux sends it outside any call, its log level.
// It knows nothing of children or catalogs: the multiplexer registers what
// must happen when a session ends (Registry.Ended) and reads the rest.
package upstream
