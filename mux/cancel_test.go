package mux

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpmux/mcpmux/config"
	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// TestCancelReachesChild: a client's notifications/cancelled reaches the
// child under the child's own request id, over both upstreams and to both
// children; the call is not retried, not even when the child dies of the
// cancellation (st's hold is read-only, which the crash path retries
// otherwise); over stdio the cancelled request gets no answer.
func TestCancelReachesChild(t *testing.T) {
	l := startTrafficLab(t, trafficOptions{})
	cancelled := 0 // audit lines saying so, so far
	ups := map[string]*upstreamClient{"stdio": stdioUpstream(t, l.m, "alice"), "http": httpUpstream(t, l.m, false)("alice")}
	for name, u := range ups {
		for _, alias := range trafficChildren {
			t.Run(name+"/"+alias, func(t *testing.T) {
				tag := name + "-" + alias
				id := mcp.NewRequestId("cancel-" + tag)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				answered := make(chan *transport.JSONRPCResponse, 1)
				go func() {
					resp, _ := u.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id,
						Method: string(mcp.MethodToolsCall), Params: map[string]any{"name": alias + config.DefaultSeparator + "hold",
							"arguments": map[string]any{"tag": tag, "exit": alias == "st"}}})
					answered <- resp
				}()
				l.waitRecord(t, alias, "hold "+tag+" started")
				call := l.waitRecord(t, alias, "call hold "+tag+" ")
				childID := call[strings.LastIndexByte(call, ' ')+1:]
				nctx, ncancel := context.WithTimeout(context.Background(), testsupport.Wait)
				defer ncancel()
				if err := u.GetTransport().SendNotification(nctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
					Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled),
						Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": "test"}}}}); err != nil {
					t.Fatal(err)
				}
				l.waitRecord(t, alias, "cancelled "+childID)
				l.waitRecord(t, alias, "hold "+tag+" ended")
				cancelled++
				testsupport.WaitFor(t, "the cancelled call's audit line", func() bool {
					return strings.Count(l.log.String(), `"outcome":"cancelled"`) >= cancelled
				})
				// Later: the child (st after dying: its next process) answers.
				if got := callChild(t, u, alias, "level", nil, nil); got == "" {
					t.Fatal("no level")
				}
				if n := l.countRecord(alias, "call hold "+tag+" "); n != 1 {
					t.Errorf("hold %s reached the child %d times, want once", tag, n)
				}
				if name == "stdio" {
					select {
					case resp := <-answered:
						t.Errorf("the cancelled request was answered: %+v", resp)
					default:
					}
				}
			})
		}
	}
}
