// Package link owns the connection to one child as bytes: the bounds on
// what a child may send (a stdio child's line reader and a remote child's
// HTTP client, both refusing a message over max_message_bytes, and the
// HTTP statuses mcpmux does not accept), and the reason a start or a
// session failed, in a few fixed words an operator can act on, derived
// from where the failure was made, never from what a child wrote.
package link
