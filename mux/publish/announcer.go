package publish

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpmux/mcpmux/mux/catalog"
	"github.com/mcpmux/mcpmux/mux/upstream"
	"github.com/mcpmux/mcpmux/policy"
)

// Announcer is the one goroutine that tells upstream what changed: it
// registers each new catalog's task tools with mcp-go and sends each
// session a list_changed for every list whose content that session sees
// changed, after a catalog is published or a policy edited. A child's
// supervisor and the policy watcher only hand it a wake-up, so neither
// ever waits on a client's write, and every session is told in the order
// things changed.
//
// It compares what it last told with what is in force when it runs, so a
// burst of changes is told once, and a catalog change and a policy edit
// that meet are judged together.
type Announcer struct {
	wake chan struct{} // holds a token while something waits to be told
	mu   sync.Mutex
	then []func() // to call once what is in force now has been told

	// What is in force, and whom to tell.
	catalog  *atomic.Pointer[catalog.Catalog]
	policies *policy.Store
	sessions *upstream.Registry
	// register hands mcp-go a catalog's task tools.
	register func(*catalog.Catalog)
	// toolList is a viewer's tools/list of a catalog, in its catalog mode.
	toolList func(*catalog.Catalog, catalog.Viewer) []byte
	// retell has every session told its tools list changed, on the next
	// run: the catalog mode changed (Retell).
	retell atomic.Bool
	log    zerolog.Logger
}

// NewAnnouncer returns the announcer of the catalog in cat under the
// policies in force, to sessions; register hands mcp-go a catalog's task
// tools. Run runs it.
func NewAnnouncer(cat *atomic.Pointer[catalog.Catalog], policies *policy.Store, sessions *upstream.Registry, register func(*catalog.Catalog),
	toolList func(*catalog.Catalog, catalog.Viewer) []byte, log zerolog.Logger) *Announcer {
	return &Announcer{wake: make(chan struct{}, 1), catalog: cat, policies: policies, sessions: sessions, register: register,
		toolList: toolList, log: log}
}

// Retell has every session told that its tools list changed: what decides
// how lists are shown (the catalog mode) changed, which the announcer
// cannot compare.
func (a *Announcer) Retell() {
	a.retell.Store(true)
	a.Changed(nil)
}

// Changed has what is in force now told, calling then (if not nil) once it
// has been: once mcp-go and every session know of it.
func (a *Announcer) Changed(then func()) {
	if then != nil {
		a.mu.Lock()
		a.then = append(a.then, then)
		a.mu.Unlock()
	}
	select {
	case a.wake <- struct{}{}:
	default: // a wake-up is pending: it will see what is in force then
	}
}

func (a *Announcer) take() []func() {
	a.mu.Lock()
	defer a.mu.Unlock()
	then := a.then
	a.then = nil
	return then
}

// Run tells upstream of each change handed to the announcer until ctx
// ends. Start runs it.
func (a *Announcer) Run(ctx context.Context) {
	toldCat, toldSet := catalog.Empty, a.policies.Current()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		// Taken before what is in force is read: whatever a then was
		// handed after is at least as new as what it waits for.
		then := a.take()
		cat, set := a.catalog.Load(), a.policies.Current()
		if len(catalog.ChangedKinds(toldCat, cat)) > 0 {
			a.register(cat)
		}
		a.tell(toldCat, cat, toldSet, set, a.retell.Swap(false))
		toldCat, toldSet = cat, set
		for _, f := range then {
			f()
		}
	}
}

// tell sends each session one list_changed per list whose content it sees
// changed between the catalog prev under the policies oldSet and next
// under newSet.
//
// Sessions are known by identity, not by claims. For an identity whose
// rules read claims, a session is told when the policy's widest view
// (Viewer.AnyCaller) changed, which every caller's view is a part of, and
// on every edit of its policy: some callers may be told of a change that
// leaves their own list as it was, none misses one.
func (a *Announcer) tell(prev, next *catalog.Catalog, oldSet, newSet *policy.Set, retell bool) {
	kinds := catalog.ChangedKinds(prev, next)
	if retell && !slices.Contains(kinds, catalog.KindTool) {
		kinds = append(kinds, catalog.KindTool)
	}
	catalogChanged := len(kinds) > 0
	edited := map[string]bool{}
	if oldSet != newSet {
		for _, id := range policy.Changed(oldSet, newSet) {
			edited[id] = true
		}
	}
	if len(edited) > 0 {
		kinds = catalog.AllKinds
	}
	if len(kinds) == 0 {
		return
	}
	type view struct{ changed [catalog.NumKinds]bool }
	views := map[string]*view{}
	for _, u := range a.sessions.All() {
		identity := u.Identity
		if !catalogChanged && !edited[identity] {
			continue // neither what it sees nor its policy changed
		}
		v, ok := views[identity]
		if !ok {
			v = &view{}
			op, np := oldSet.For(identity), newSet.For(identity)
			byClaims := catalog.ReadsClaims(op) || catalog.ReadsClaims(np)
			for _, k := range kinds {
				ov, nv := catalog.Viewer{Policy: op, AnyCaller: byClaims}, catalog.Viewer{Policy: np, AnyCaller: byClaims}
				switch {
				case k == catalog.KindTool && (retell || byClaims && edited[identity]):
					v.changed[k] = true // the catalog mode changed, or the policy's rules
				case k == catalog.KindTool:
					v.changed[k] = !bytes.Equal(a.toolList(prev, ov), a.toolList(next, nv))
				default:
					v.changed[k] = !bytes.Equal(prev.Encode(k, ov), next.List(k, nv))
				}
			}
			views[identity] = v
		}
		sent := map[mcp.MCPMethod]bool{}
		for _, k := range kinds {
			if !v.changed[k] || sent[listChanged[k]] {
				continue
			}
			sent[listChanged[k]] = true
			if f, ok := u.MCP().(server.SessionWithSubscriptionFilter); ok {
				if filter, active := f.SubscriptionFilter(); active && !wants(filter, k) {
					continue // a listener that did not ask for these
				}
			}
			if err := a.sessions.Notify(u, string(listChanged[k]), upstream.OwnParams); err != nil {
				a.log.Warn().Err(err).Str("session", u.ID).Msg("could not send " + string(listChanged[k]))
			}
		}
	}
}

// wants reports whether a 2026-07-28 listener's filter asks for changes of
// kind k.
func wants(f mcp.SubscriptionFilter, k catalog.Kind) bool {
	switch k {
	case catalog.KindTool:
		return f.ToolsListChanged
	case catalog.KindPrompt:
		return f.PromptsListChanged
	}
	return f.ResourcesListChanged
}

// listChanged is the notification that tells a client a kind's list changed.
var listChanged = [catalog.NumKinds]mcp.MCPMethod{
	catalog.KindTool:     mcp.MethodNotificationToolsListChanged,
	catalog.KindPrompt:   mcp.MethodNotificationPromptsListChanged,
	catalog.KindResource: mcp.MethodNotificationResourcesListChanged,
	catalog.KindTemplate: mcp.MethodNotificationResourcesListChanged,
}
