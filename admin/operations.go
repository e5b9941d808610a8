package admin

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpmux/mcpmux/mux/pipeline"
)

// operationMetrics are the OpenTelemetry MCP conventions' duration
// histograms, as Prometheus names them: mcp.server.operation.duration
// (mcp_server_operation_duration_seconds) of the requests mcpmux answers,
// and mcp.client.operation.duration (mcp_client_operation_duration_seconds)
// of its requests to the children. They are plain Prometheus histograms
// with the conventions' names, unit and attributes as labels, beside
// mcpmux's other series: the OpenTelemetry Prometheus exporter would bring
// in the metric SDK, and a second registry to merge, for the same lines.
type operationMetrics struct {
	server, client *prometheus.HistogramVec
	// series caches each label set's histogram, so that a request takes
	// no lock of the vector's (a read-locked map shared by every call).
	series sync.Map // operationKey -> prometheus.Observer
}

type operationKey struct {
	client                    bool
	method, server, errorType string
}

func newOperationMetrics() *operationMetrics {
	return &operationMetrics{
		server: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_server_operation_duration_seconds",
			Help: "mcp.server.operation.duration: requests mcpmux answered, by mcp.method.name and error.type " +
				"(\"\": none, \"tool_error\": a result with isError, else the JSON-RPC code).",
			Buckets: childBuckets,
		}, []string{"mcp_method_name", "error_type"}),
		client: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcp_client_operation_duration_seconds",
			Help: "mcp.client.operation.duration: requests mcpmux sent its child servers, by mcp.method.name, " +
				"server alias and error.type.",
			Buckets: childBuckets,
		}, []string{"mcp_method_name", "mcpmux_server_alias", "error_type"}),
	}
}

// Operation implements pipeline.Observer.
func (m *Metrics) Operation(op pipeline.Operation) {
	k := operationKey{op.Client, op.Method, "", op.ErrorType}
	if op.Client {
		k.server = m.server(op.Server).alias
	}
	o, ok := m.ops.series.Load(k)
	if !ok {
		var h prometheus.Observer
		if op.Client {
			h = m.ops.client.WithLabelValues(k.method, k.server, k.errorType)
		} else {
			h = m.ops.server.WithLabelValues(k.method, k.errorType)
		}
		o, _ = m.ops.series.LoadOrStore(k, h)
	}
	o.(prometheus.Observer).Observe(op.Took.Seconds())
}
