// Package edge owns mcpmux's two edges toward its clients: stdio (one
// client on mcpmux's own stdin and stdout) and streamable HTTP (many
// sessions, both protocol eras). Their shared front end reads each message
// once (package frame), hands each request mcpmux answers itself to the
// Backend, and everything else to mcp-go's server, at one place per edge.
// The edges carry a client's request ids exactly past mcp-go, refuse what
// a client may not send (ids of the wrong type or already in flight,
// bodies and lines over their limits) and write every answer whole, once,
// in order with what was sent before it.
package edge
