package mux

import (
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpmux/mcpmux/internal/testsupport"
)

// The requests mcp-go answers (the handshake, ping, the log level, the
// task store's lists) have server spans too, their parents those of
// their _meta or their HTTP headers.

func TestTraceOfHandedOffRequests(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		m, exp, _ := tracedLab(t)
		s := openSessionAs(t, m, "dev")
		defer s.close()
		wantAttrs(t, spanNamed(t, exp, "initialize"), map[string]string{"mcp.method.name": "initialize",
			"network.transport": "pipe", "mcpmux.identity": "dev", "jsonrpc.request.id": "init"})

		exp.Reset()
		s.exchange(`{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{"traceparent":"` + clientParent + `"}}}`)
		ping := spanOfID(t, exp, "ping", "7") // exchange's own pings have spans too
		if ping.Parent.TraceID().String() != clientTraceID || ping.Parent.SpanID().String() != clientSpanID {
			t.Errorf("ping's span's parent %v, want its _meta's traceparent", ping.Parent)
		}
		wantAttrs(t, ping, map[string]string{"mcp.method.name": "ping", "network.transport": "pipe",
			"jsonrpc.request.id": "7", "mcp.protocol.version": "2025-11-25", "mcpmux.identity": "dev"})

		s.exchange(`{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"debug"}}`)
		wantAttrs(t, spanNamed(t, exp, "logging/setLevel"), map[string]string{"mcp.method.name": "logging/setLevel"})
		s.exchange(`{"jsonrpc":"2.0","id":9,"method":"tasks/list","params":{}}`)
		wantAttrs(t, spanNamed(t, exp, "tasks/list"), map[string]string{"mcp.method.name": "tasks/list"})

		// One mcp-go refuses: the span says so.
		exp.Reset()
		if got := s.exchange(`{"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"loud"}}`); !strings.Contains(strings.Join(got, "\n"), `"error"`) {
			t.Fatalf("setLevel loud: %s, want an error", got)
		}
		refused := spanNamed(t, exp, "logging/setLevel")
		if refused.Status.Code.String() != "Error" {
			t.Errorf("refused setLevel's span status %v, want Error", refused.Status)
		}
		wantAttrs(t, refused, map[string]string{"error.type": "-32602"})
	})

	t.Run("HTTP", func(t *testing.T) {
		h, _, exp := tracedHTTP(t, "streamable", nil)
		sid, code, text := h.open(t, "dev")
		if sid == "" {
			t.Fatalf("initialize: %d %s", code, text)
		}
		wantAttrs(t, spanNamed(t, exp, "initialize"), map[string]string{"network.transport": "tcp", "jsonrpc.request.id": "1"})
		exp.Reset()
		h.postWithHeaders(t, sid, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`, map[string]string{"traceparent": clientParent})
		ping := spanNamed(t, exp, "ping")
		if ping.Parent.TraceID().String() != clientTraceID || ping.Parent.SpanID().String() != clientSpanID {
			t.Errorf("ping's span's parent %v, want the traceparent header's", ping.Parent)
		}
		wantAttrs(t, ping, map[string]string{"network.transport": "tcp", "mcp.session.id": sid,
			"jsonrpc.request.id": "p1", "mcp.protocol.version": "2025-11-25"})
	})
}

// spanOfID is the one span named name of the request with JSON-RPC id id.
func spanOfID(t *testing.T, exp *tracetest.InMemoryExporter, name, id string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		for _, kv := range s.Attributes {
			if s.Name == name && kv.Key == "jsonrpc.request.id" && kv.Value.Emit() == id {
				found = append(found, s)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one span %q of request %s, got %d", name, id, len(found))
	}
	return found[0]
}

// TestTraceOfAnEdgeRefusal: a request the HTTP edge refuses before the
// pipeline (here for its Origin) is logged with the ids of the trace
// context of its traceparent header.
func TestTraceOfAnEdgeRefusal(t *testing.T) {
	log := &testsupport.SyncBuffer{}
	h, _, _ := tracedHTTP(t, "streamable", log)
	code, _ := h.postWithHeaders(t, "", testInitialize, map[string]string{"Origin": "https://elsewhere.example", "traceparent": clientParent})
	if code != http.StatusForbidden {
		t.Fatalf("a cross-origin request: %d, want 403", code)
	}
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "request refused: cross-origin") {
			if !strings.Contains(line, `"trace_id":"`+clientTraceID+`"`) || !strings.Contains(line, `"span_id":"`+clientSpanID+`"`) {
				t.Errorf("the refusal's line lacks the traceparent's ids: %s", line)
			}
			return
		}
	}
	t.Fatalf("no refusal logged:\n%s", log.String())
}
