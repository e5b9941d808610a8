package replicas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// purposeTask is what task ids are sealed for: one never opens as a
// session id or a requestState.
const purposeTask = "task"

// BootPath is where the peer listener tells this process's boot id, to a
// request a replica signed (PeerBoot).
const BootPath = "/mcpmux/boot"

// ErrOwnerGone is why a replica is taken for gone: it is not among the
// peers, cannot be reached, or is another process than the one that
// sealed the id.
var ErrOwnerGone = errors.New("the replica that owns it is gone")

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

// Boot is this process's boot id.
func (t TaskIDs) Boot() string { return t.n.boot }

// Gone returns nil when owner's process is still boot: its peer listener
// answers BootPath with it. Otherwise ErrOwnerGone, with why: owner is not
// among the peers, it cannot be reached (as forwarding decides, within the
// dial timeout), or it answers with another boot id (it restarted). An
// owner that answers otherwise (an mcpmux without BootPath, during a
// rolling update) is taken for alive. It waits at most twice the dial
// timeout, or until ctx ends.
func (t TaskIDs) Gone(ctx context.Context, owner, boot string) error {
	n := t.n
	if !n.peers.has(ctx, owner) {
		return fmt.Errorf("%w: %s is not among the peers", ErrOwnerGone, owner)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*n.dial)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+owner+BootPath, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrOwnerGone, owner, err)
	}
	n.sign(req)
	resp, done, err := n.client.exchange(ctx, owner, req, nil)
	if err != nil {
		return fmt.Errorf("%w: %s cannot be reached: %w", ErrOwnerGone, owner, err)
	}
	defer done()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	if got := strings.TrimSpace(string(b)); got != boot {
		return fmt.Errorf("%w: %s has restarted since, and the task went with its earlier process", ErrOwnerGone, owner)
	}
	return nil
}

// PeerBoot is the peer listener's BootPath: this process's boot id, to a
// request a replica signed (403 otherwise).
func (n *Node) PeerBoot() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := n.checkPeer(r); err != nil {
			http.Error(w, "Forbidden: not a request from a replica", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, n.boot+"\n")
	})
}
