// Package child owns mcpmux's children: one supervisor per configured
// server (Server), which starts it, reads its catalog, restarts it with a
// fresh initialize when it dies and publishes each moment of its life as
// an immutable State; and the MCP session with each generation of it
// (Session), with the table of requests in flight for clients (InCall).
// A stdio child's transport is mcpmux's own (childconn.go): an answer to
// one of mcpmux's requests reaches its call by id as the bytes the child
// wrote; everything else is read as mcp-go's stdio transport reads it.
//
// A child reaches the rest of mcpmux only through Host: it tells the host
// what it published and hands it what its sessions receive that is not an
// answer to one of mcpmux's own requests (progress, log messages, the
// child's requests of a client). It never sees an upstream session but
// through the upstream.Attachment of the call it serves.
package child
