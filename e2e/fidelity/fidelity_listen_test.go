package fidelity

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	ts "github.com/mcpmux/mcpmux/internal/testsupport"
)

// A 2026-07-28 client, which has no resources/subscribe, names resources
// in the filter of its subscriptions/listen: mcpmux subscribes at the
// owning child under the child's own URI before it acknowledges the
// stream; the child's notifications/resources/updated comes back on that
// stream (tagged with its subscription) under the URI the client named,
// the child's own fields kept; closing the stream unsubscribes at the
// child.
func TestFidelityListenSubscribesResources(t *testing.T) {
	t.Parallel()
	l := fidelityLab(t, "", ts.Server{Alias: "docs"})
	l.WritePolicy(t, "reader", "allow = [\"*\"]\nallow_resources = [\"docs\"]\n")
	l.AddUpstream(t, `listen = "127.0.0.1:0"`+ts.TokenEntry("reader", "sha256", ts.SHA256Hex(ts.FidelityToken("reader"))))
	h := ts.StartHTTPMux(t, l.Lab, ts.HTTPStart{})
	conn := ts.ConnectHTTP(t, h.URL(), ts.HTTPClient{Token: ts.FidelityToken("reader"), Version: mcp.ProtocolVersion20260728, Log: h.Log})
	s := &fSess{c: conn.Client, notes: ts.RecordNotes(conn.Client)}
	touch := func() string {
		t.Helper()
		return ts.Text(conn.MustCall("docs__touch", map[string]any{"uri": readmeURI}))
	}
	uri := exposed("docs", readmeURI)
	sub, unsub := string(mcp.MethodResourcesSubscribe), string(mcp.MethodResourcesUnsubscribe)

	stop, err := s.c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{uri}}, func(err error) {
		t.Errorf("subscriptions/listen: %v", err)
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	s.notes.Await(t, "subscriptions/acknowledged", 0, ts.Method(mcp.MethodNotificationSubscriptionsAcknowledged))
	if n := l.childGotURI(t, "docs", sub, readmeURI); n != 1 {
		t.Fatalf("docs received %d resources/subscribe of %s once the stream was acknowledged, want 1", n, readmeURI)
	}

	from := s.notes.Len()
	if got := touch(); got != "notified: "+readmeURI {
		t.Fatalf("docs__touch: %q", got)
	}
	i := s.notes.Await(t, "resources/updated", from, ts.Method(string(mcp.MethodNotificationResourceUpdated)))
	n := s.notes.All()[i]
	if n.Params.AdditionalFields["uri"] != uri || n.Params.AdditionalFields["x-lab-note"] != "kept" {
		t.Errorf("resources/updated params %v, want uri %s and x-lab-note kept", n.Params.AdditionalFields, uri)
	}
	if n.Params.Meta[mcp.MetaKeySubscriptionID] == nil {
		t.Errorf("resources/updated %+v carries no subscription id: it did not come down the listen stream", n.Params)
	}

	stop()
	stopped = true
	ts.WaitFor(t, "the child to be unsubscribed", func() bool { return l.childGotURI(t, "docs", unsub, readmeURI) == 1 })
	if got := touch(); got != "not subscribed: "+readmeURI {
		t.Errorf("docs__touch after the stream closed: %q", got)
	}
}
