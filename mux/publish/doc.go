// Package publish owns the merged catalog's publication: the Publisher
// builds each new snapshot from what the children list, after Pinning has
// held the definitions that differ from their pins (package pins), and
// swaps it in; the Announcer, one goroutine, then registers its task tools
// with mcp-go and tells each upstream session whose view changed. A
// child's supervisor only hands the Announcer a wake-up, so publishing
// never waits on a client.
package publish
