// Package child owns mcpmux's children: one supervisor per configured
// server (Server), which starts it, reads its catalog, restarts it with a
// fresh initialize when it dies and publishes each moment of its life as
// an immutable State; and the MCP session with each generation of it
// (Session), with the table of requests in flight for clients (InCall),
// the limits on what it may send and the reasons it failed.
//
// A child reaches the rest of mcpmux only through Host: it tells the host
// what it published and hands it what its sessions receive that is not an
// answer to one of mcpmux's own requests (progress, log messages, the
// child's requests of a client). It never sees an upstream session but
// through the upstream.Attachment of the call it serves.
package child
