package telemetry

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/propagation"
)

// MetaPropagator reads the trace context of the _meta of a request mcp-go
// answers (server.WithMetaPropagator), so that the context mcp-go's hooks
// get carries it, as the pipeline's requests do theirs. It writes nothing:
// what mcpmux sends carries mcpmux's own spans (MetaFor).
type MetaPropagator struct{}

// InjectMeta returns meta as it is.
func (MetaPropagator) InjectMeta(_ context.Context, meta *mcp.Meta) *mcp.Meta { return meta }

// ExtractMeta is ctx with the trace context of meta's traceparent,
// tracestate and baggage members, which win over ctx's (the HTTP
// headers'); ctx itself when meta has none.
func (MetaPropagator) ExtractMeta(ctx context.Context, meta *mcp.Meta) context.Context {
	if meta == nil {
		return ctx
	}
	var c propagation.MapCarrier
	for k := range metaKeys {
		if s, ok := meta.AdditionalFields[k].(string); ok {
			if c == nil {
				c = propagation.MapCarrier{}
			}
			c[k] = s
		}
	}
	if c == nil {
		return ctx
	}
	return propagator.Extract(ctx, c)
}

// ErrorCode is the JSON-RPC code mcp-go answers err, an error its hooks
// are given, with; -32603 for one it does not code.
func ErrorCode(err error) int {
	var coded interface{ ToJSONRPCError() mcp.JSONRPCError }
	if errors.As(err, &coded) {
		return coded.ToJSONRPCError().Error.Code
	}
	return mcp.INTERNAL_ERROR
}
