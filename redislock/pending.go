package redislock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock/dlock"
)

// pendingRelease is a release that failed without a certain answer (a
// timeout, a broken connection): it may not have run, and then the store
// still counts a hold its owner's client has forgotten. The owner's next
// acquire would re-enter that hold unknowingly, with its old token, and the
// store would count one hold more than the client has: the lock would
// outlive every later Unlock while the owner keeps locking. So the node
// sends it again, as the same request (it acts at most once), before the
// owner's next acquire or release of that lock.
type pendingRelease struct {
	token  uint64
	count  int
	notify bool
	req    string
}

// maxPending bounds the locks with failed releases a node remembers; beyond
// it, one is forgotten (its hold still ends with its TTL once unrenewed).
const maxPending = 4096

func pendingKey(k keys, owner string) string { return k.lock + "\x00" + owner }

// remember records a release that failed uncertainly.
func (n *Node) remember(k keys, owner string, p pendingRelease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := pendingKey(k, owner)
	if _, ok := n.pending[key]; !ok && len(n.pending) >= maxPending {
		for other := range n.pending {
			delete(n.pending, other)
			break
		}
	}
	n.pending[key] = append(n.pending[key], p)
}

// settle sends again the failed releases of owner's holds of k. An error
// means one is still uncertain: the caller must not go on, or it could
// re-enter that hold.
func (n *Node) settle(ctx context.Context, k keys, owner string) error {
	key := pendingKey(k, owner)
	n.mu.Lock()
	ps := n.pending[key]
	delete(n.pending, key)
	n.mu.Unlock()
	for i, p := range ps {
		_, err := n.releaseReq(ctx, k, owner, p.token, p.count, p.notify, p.req)
		if err != nil && !errors.Is(err, dlock.ErrLeaseLost) {
			n.mu.Lock()
			n.pending[key] = append(ps[i:], n.pending[key]...)
			n.mu.Unlock()
			return fmt.Errorf("redislock: an earlier release of this hold is still unconfirmed: %w", err)
		}
	}
	return nil
}
