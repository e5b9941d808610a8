// Package telemetry owns mcpmux's OpenTelemetry traces: the tracer
// provider and its OTLP exporter (Start, configured by the standard OTEL_*
// environment and the [telemetry] table), the spans of a request (a server
// span per upstream request, a client span per request to a child, and
// their events and attributes, by the MCP semantic conventions), and the
// trace context carried in from a client (HTTP headers, params._meta) and
// out to a child (its request's _meta, a remote child's HTTP headers).
//
// Tracing is off unless turned on; off, every hook is a nil check or a
// look at the context's span, and allocates nothing. A *Tracing is passed
// to what starts server spans; everything below finds the request's span
// in its context.
package telemetry
