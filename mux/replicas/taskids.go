package replicas

import (
	"context"
	"errors"
	"fmt"
)

// purposeTask is what task ids are sealed for: one never opens as a
// session id or a requestState.
const purposeTask = "task"

// ErrOwnerGone is why a replica is taken for gone: it is not among the
// peers, or cannot be reached.
var ErrOwnerGone = errors.New("the owner replica is gone")

// TaskIDs are the node's seals of upstream task ids (tasks.IDs): sealed to
// name this replica, opened with the keys in force.
type TaskIDs struct{ n *Node }

// TaskIDs returns the node's seals of task ids.
func (n *Node) TaskIDs() TaskIDs { return TaskIDs{n} }

// Seal returns the task id handed out for local.
func (t TaskIDs) Seal(local string) string { return t.n.ring.Seal(purposeTask, t.n.self, local) }

// Open returns the owner and local id a task id names; seal.ErrOpen for
// one that does not open.
func (t TaskIDs) Open(id string) (owner, local string, err error) {
	return t.n.ring.Open(purposeTask, id)
}

// Self is this replica's advertised peer address.
func (t TaskIDs) Self() string { return t.n.self }

// Gone returns nil when owner's peer listener accepts a connection within
// the dial timeout; otherwise ErrOwnerGone, with why: owner is not among
// the peers, or the dial failed. It decides as forwarding does: a replica
// that is neither a peer nor reachable owns nothing any more.
func (t TaskIDs) Gone(ctx context.Context, owner string) error {
	if !t.n.peers.has(ctx, owner) {
		return fmt.Errorf("%w: %s is not among the peers", ErrOwnerGone, owner)
	}
	c, err := t.n.transport.DialContext(ctx, "tcp", owner)
	if err != nil {
		return fmt.Errorf("%w: %s cannot be reached: %w", ErrOwnerGone, owner, err)
	}
	_ = c.Close()
	return nil
}
