package mux

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpmux/mcpmux/mux/edge"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// unsubChild is a real mcp-go child with subscribable resources that holds
// every resources/unsubscribe until mcpmux gives up on it, and counts them.
type unsubChild struct {
	mu      sync.Mutex
	held    int            // unsubscribes being held now
	maxHeld int            // the most held at once
	unsubs  map[string]int // unsubscribes per URI
}

func (uc *unsubChild) counts() (maxHeld int, unsubs map[string]int) {
	uc.mu.Lock()
	defer uc.mu.Unlock()
	unsubs = map[string]int{}
	for k, v := range uc.unsubs {
		unsubs[k] = v
	}
	return uc.maxHeld, unsubs
}

// start serves the child with n resources, res://0 to res://n-1, until tb
// ends.
func (uc *unsubChild) start(tb testing.TB, n int) string {
	uc.unsubs = map[string]int{}
	hooks := &server.Hooks{}
	hooks.AddBeforeUnsubscribe(func(ctx context.Context, _ any, req *mcp.UnsubscribeRequest) {
		uc.mu.Lock()
		uc.held++
		uc.maxHeld = max(uc.maxHeld, uc.held)
		uc.unsubs[req.Params.URI]++
		uc.mu.Unlock()
		<-ctx.Done() // mcpmux's bound, or its shutdown
		uc.mu.Lock()
		uc.held--
		uc.mu.Unlock()
	})
	child := server.NewMCPServer("lab", "1", server.WithResourceCapabilities(true, false), server.WithHooks(hooks))
	for i := range n {
		uri := fmt.Sprintf("res://%d", i)
		child.AddResource(mcp.NewResource(uri, uri), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, Text: "x"}}, nil
		})
	}
	return serveChild(tb, child).URL + "/mcp"
}

// Sessions that the idle sweeper ends in one sweep have their subscriptions
// ended at the child side by side, off the sweeper's goroutine: with the
// child answering no unsubscribe, all of them are held there at once (one
// after another, each waited for up to its second, the sweep would stall
// on each). Each resource is unsubscribed once.
func TestIdleSweepDropsSubscriptionsAtOnce(t *testing.T) {
	const n = 3
	_, before := testsupport.Goroutines()
	t.Cleanup(func() { testsupport.CheckGoroutines(t, before) }) // after the lab, registered first
	uc := &unsubChild{}
	url := uc.start(t, n)
	m := runMux(t, map[string]string{"reader": "allow = [\"*\"]\nallow_resources = [\"lab\"]"}, nil, func(policies string) string {
		return fmt.Sprintf("[mux]\npolicy_dir = %q\n\n[servers.lab]\nurl = %q\n", policies, url)
	})
	// The sweep looks every second; a session is idle after two.
	up, muxURL := serveLab(t, m, edge.HTTPOptions{Path: "/mcp", SessionIdleTimeout: 2 * time.Second},
		func(r *http.Request) string { return r.Header.Get("X-Identity") })
	h := &httpMux{m: m, up: up, url: muxURL}

	var ids []string
	for i := range n {
		sid, code, text := h.open(t, "reader")
		if sid == "" {
			t.Fatalf("initialize: %d %s", code, text)
		}
		h.send(t, http.MethodPost, "reader", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		uri := exposedURI(t, h, sid, fmt.Sprintf("res://%d", i))
		if code, text, _ := h.send(t, http.MethodPost, "reader", sid,
			fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":%q}}`, uri)); code != http.StatusOK || strings.Contains(text, `"error"`) {
			t.Fatalf("subscribe %s: %d %s", uri, code, text)
		}
		ids = append(ids, sid)
	}
	// All idle from now on, so that one sweep ends them all.
	for _, id := range ids {
		u := h.m.sessions.Lookup(id)
		u.Begin(0)
		u.Finish(0)
	}
	testsupport.WaitFor(t, "every unsubscribe held at the child at once", func() bool {
		most, _ := uc.counts()
		return most == n
	})
	for _, id := range ids {
		if h.m.sessions.Lookup(id) != nil {
			t.Errorf("session %s still open", id)
		}
	}
	testsupport.WaitFor(t, "the unsubscribes to end", func() bool {
		uc.mu.Lock()
		defer uc.mu.Unlock()
		return uc.held == 0
	})
	if _, unsubs := uc.counts(); len(unsubs) != n {
		t.Errorf("unsubscribed %v; want each of %d resources once", unsubs, n)
	} else {
		for uri, k := range unsubs {
			if k != 1 {
				t.Errorf("%s unsubscribed %d times", uri, k)
			}
		}
	}
}

// exposedURI finds the URI under which mcpmux lists the child's resource
// orig.
func exposedURI(t *testing.T, h *httpMux, sid, orig string) string {
	t.Helper()
	_, text, _ := h.send(t, http.MethodPost, "reader", sid, `{"jsonrpc":"2.0","id":2,"method":"resources/list"}`)
	var res struct {
		Result struct {
			Resources []struct{ URI, Name string } `json:"resources"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &res); err != nil {
		t.Fatalf("resources/list: %v: %s", err, text)
	}
	for _, r := range res.Result.Resources {
		if r.Name == orig {
			return r.URI
		}
	}
	t.Fatalf("resources/list lists no %s: %s", orig, text)
	return ""
}
