package relay

// Logging: a child's notifications/message reaches the clients tagged with
// the child's alias, and a client's logging/setLevel reaches every child
// that declared logging.

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/child"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Log relays a child's log message: logger becomes the alias, or
// "alias/logger" when the child named one. A message that can be
// attributed to a call (attribute's rule) goes to that call's client, in
// order with the call's progress and before its answer; one sent while
// calls of several identities are in flight on the session reaches no
// client, since it may be any of theirs and could carry one identity's data
// to another's session, and is written to mcpmux's own log instead; any
// other goes to every session whose identity may see anything of the
// child. What is below the level a session set (logging/setLevel; for a
// 2026-07-28 request, the level in its _meta) is dropped (logWanted). It
// runs on the child transport's read goroutine and never blocks.
func (m *Relay) Log(c *child.Server, sess *child.Session, n mcp.JSONRPCNotification) {
	fields := n.Params.AdditionalFields
	level, _ := fields["level"].(string)
	childLogger, _ := fields["logger"].(string)
	logger := c.Alias()
	if childLogger != "" {
		logger = c.Alias() + "/" + childLogger
	}
	call, err := sess.Attribute(context.Background())
	switch {
	case err != nil:
		ev := c.Log().WithLevel(childLevel(mcp.LoggingLevel(level))).Str("child_level", level).Str("child_logger", childLogger)
		if data, jerr := json.Marshal(fields["data"]); jerr != nil || len(data) > maxLoggedData {
			ev = ev.Str("data", string(data[:min(len(data), maxLoggedData)])).Bool("data_cut", true)
		} else {
			ev = ev.RawJSON("data", data)
		}
		ev.AnErr("reason", err).Msg("a log message from the server was not relayed to any client: it names no call, and calls of more than one identity are in flight on it")
		return
	case call != nil:
		call.Enqueue(string(mcp.MethodNotificationMessage), map[string]any{"level": level, "logger": logger, "data": fields["data"]},
			func(to *upstream.Attachment) bool { return logWanted(to, mcp.LoggingLevel(level)) }, m.deliver)
		return
	}
	params := map[string]any{"level": mcp.LoggingLevel(level), "logger": logger, "data": fields["data"]}
	cat, set := m.catalog.Load(), m.policies.Current()
	sees := map[string]bool{}
	for _, u := range m.sessions.All() {
		ok, known := sees[u.Identity]
		if !known {
			ok = seesAlias(set.For(u.Identity), cat, c.Alias())
			sees[u.Identity] = ok
		}
		if ok && logWanted(&upstream.Attachment{Sess: u}, mcp.LoggingLevel(level)) {
			_ = m.sessions.Notify(u, string(mcp.MethodNotificationMessage), params)
		}
	}
}

// maxLoggedData is how much of a child's log message mcpmux's own log
// keeps.
const maxLoggedData = 4 << 10

// childLevel is the level of mcpmux's own log for a child's message at
// level; info for a level the protocol does not define.
func childLevel(level mcp.LoggingLevel) zerolog.Level {
	switch level {
	case mcp.LoggingLevelDebug:
		return zerolog.DebugLevel
	case mcp.LoggingLevelWarning:
		return zerolog.WarnLevel
	case mcp.LoggingLevelError, mcp.LoggingLevelCritical, mcp.LoggingLevelAlert, mcp.LoggingLevelEmergency:
		return zerolog.ErrorLevel
	}
	return zerolog.InfoLevel
}

// logWanted reports whether the client of the request a wants a log
// message at level: a 2026-07-28 request, if its _meta asked for that
// level; a session that sent logging/setLevel, if that level admits it;
// any other session, whatever the child chose to send, as it would get
// it connected to the child directly (mcp-go's default for a session,
// error, would drop a child's warning). A level the protocol does not
// define is never wanted.
func logWanted(a *upstream.Attachment, level mcp.LoggingLevel) bool {
	if a.Proto.Modern {
		return a.Proto.LogLevel != "" && level.ShouldSendTo(a.Proto.LogLevel)
	}
	if a.Sess == nil {
		return false
	}
	if l, set := a.Sess.LogLevel(); set {
		return level.ShouldSendTo(l)
	}
	return level.ShouldSendTo(logLevels[0])
}

// seesAlias reports whether policy p lets its identity see anything of the
// child alias: a tool, a prompt, a resource or a template.
func seesAlias(p *policy.Policy, cat *catalog.Catalog, alias string) bool {
	if p.Allows(policy.Item{Kind: policy.Resource, Server: alias}) {
		for _, k := range []catalog.Kind{catalog.KindResource, catalog.KindTemplate} {
			for _, e := range cat.Kinds[k].List {
				if e.Server == alias {
					return true
				}
			}
		}
	}
	for _, k := range []catalog.Kind{catalog.KindTool, catalog.KindPrompt} {
		for _, e := range cat.Kinds[k].List {
			if e.Server == alias && p.Allows(e.Item()) {
				return true
			}
		}
	}
	return false
}

// logLevels orders the levels from the most verbose.
var logLevels = []mcp.LoggingLevel{mcp.LoggingLevelDebug, mcp.LoggingLevelInfo, mcp.LoggingLevelNotice,
	mcp.LoggingLevelWarning, mcp.LoggingLevelError, mcp.LoggingLevelCritical, mcp.LoggingLevelAlert,
	mcp.LoggingLevelEmergency}

// childLogLevel is the level the children are asked for: the most verbose
// any upstream session that set one asked for, since each session's own
// is applied as messages are relayed (logWanted); "" while no client has
// set one.
func (m *Relay) childLogLevel() mcp.LoggingLevel {
	if !m.levelSet.Load() {
		return ""
	}
	best := len(logLevels)
	for _, u := range m.sessions.All() {
		l, set := u.LogLevel()
		if !set {
			continue
		}
		for i, lv := range logLevels {
			if lv == l && i < best {
				best = i
			}
		}
	}
	if best == len(logLevels) {
		return ""
	}
	return logLevels[best]
}

// afterSetLevel passes a client's logging/setLevel on to every ready child
// that declared logging, and waits for them (each within the call timeout).
func (m *Relay) afterSetLevel(ctx context.Context, _ any, req *mcp.SetLevelRequest, _ *mcp.EmptyResult) {
	if u := m.sessions.OfMCP(server.ClientSessionFromContext(ctx)); u != nil {
		u.SetLevel(req.Params.Level)
	}
	m.levelSet.Store(true)
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range m.children.Load().List() {
		sess := c.State().Session
		if sess == nil || sess.Lost() || sess.Caps().Logging == nil {
			continue
		}
		wg.Go(func() { m.ApplyLogLevel(ctx, c, sess) })
	}
	wg.Wait()
}

// ApplyLogLevel asks sess of c for the level the clients want, if any
// client set one.
func (m *Relay) ApplyLogLevel(ctx context.Context, c *child.Server, sess *child.Session) {
	level := m.childLogLevel()
	if level == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.p.Settings().CallTimeout)
	defer cancel()
	// Sent as mcpmux's own request, never attributed to the client's.
	if _, err := sess.Request(ctx, nil, string(mcp.MethodSetLogLevel), map[string]any{"level": level}); err != nil {
		c.Log().Warn().Err(err).Str("level", string(level)).Msg("logging/setLevel failed")
	}
}
