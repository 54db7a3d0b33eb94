package redisnode

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// pendingRelease is a release, or the cancel of an acquire, that failed
// without a certain answer (a timeout, a broken connection): it may not
// have run, and then the store still counts a hold its owner's client has
// forgotten. The owner's next acquire would re-enter that hold unknowingly,
// with its old token, and the store would count one hold more than the
// client has: the lock would outlive every later Unlock while the owner
// keeps locking. So the node sends it again, as the same request (it acts
// at most once), before the owner's next acquire or release of that lock.
type pendingRelease struct {
	cancel bool // a cancel of acquire request req; else a release
	token  uint64
	count  int
	notify bool
	req    string
}

// run sends p once more.
func (n *Node) run(ctx context.Context, k Keys, owner string, p pendingRelease) error {
	if p.cancel {
		s, who := cancelScript, owner
		if k.kind != driver.Exclusive {
			s, who = kindCancelScript, k.holdID(owner)
		}
		flag := "0"
		if p.notify {
			flag = "1"
		}
		if err := n.call(ctx, s, k.args, p.req, who, flag).Err(); err != nil {
			return fmt.Errorf("redislock: cancel: %w", err)
		}
		return nil
	}
	_, err := n.releaseReq(ctx, k, owner, p.token, p.count, p.notify, p.req)
	return err
}

// errForgotten is a release, sent again (by the node after an uncertain
// failure, or by go-redis after a lost reply), that the hold can no longer
// tell from one that ran: its id is not among the hold's recent requests,
// but an id of its node at least as recent was dropped from that list
// (while other processes of the same owner changed the hold). Running it
// could release another process's count, a second holder while that
// process's lease reads valid; so the release is given up, and if it had
// not run, the hold keeps one count too many: the lock stays the owner's
// until its holds all end and it expires (its TTL, once nobody renews it).
var errForgotten = errors.New("redislock: an uncertain release can no longer be told from one that ran; given up")

// Cancel undoes acquire request req of owner (see cancelScript); if that
// fails, the node sends it again before owner's next call on k. With
// notify, a lock the cancel frees is announced even if no waiter is queued
// (as Release's notify).
func (n *Node) Cancel(ctx context.Context, k Keys, owner, req string, notify bool) error {
	p := pendingRelease{cancel: true, req: req, notify: notify}
	err := n.run(ctx, k, owner, p)
	if err != nil {
		n.remember(k, owner, p)
	}
	return err
}

// maxPending bounds the locks with failed releases a node remembers, and
// maxPendingPerLock the calls remembered per lock and owner; beyond them,
// the oldest are forgotten (a forgotten hold still ends with its TTL once
// nobody renews it).
const (
	maxPending        = 4096
	maxPendingPerLock = 64
)

// ErrUnsettled marks a call refused because an earlier release or cancel of
// the same hold is still unconfirmed: the call itself never reached the
// store, so there is nothing of it to undo.
var ErrUnsettled = errors.New("an earlier release of this hold is still unconfirmed")

// pendingKey names the hold a pending call is about: a comparable struct,
// so that looking one up (on every acquire and release) allocates nothing.
type pendingKey struct {
	lock, owner string
	kind        driver.Kind
}

func pendingKeyOf(k Keys, owner string) pendingKey { return pendingKey{k.lock, owner, k.kind} }

// remember records a release that failed uncertainly.
func (n *Node) remember(k Keys, owner string, p pendingRelease) {
	n.mu.Lock()
	defer n.mu.Unlock()
	key := pendingKeyOf(k, owner)
	if _, ok := n.pending[key]; !ok && len(n.pending) >= maxPending {
		for other := range n.pending {
			delete(n.pending, other)
			break
		}
	}
	ps := append(n.pending[key], p)
	if len(ps) > maxPendingPerLock {
		ps = ps[len(ps)-maxPendingPerLock:]
	}
	n.pending[key] = ps
}

// settle sends again the failed releases and cancels of owner's holds of k. An error
// means one is still uncertain: the caller must not go on, or it could
// re-enter that hold.
func (n *Node) settle(ctx context.Context, k Keys, owner string) error {
	key := pendingKeyOf(k, owner)
	n.mu.Lock()
	ps := n.pending[key]
	delete(n.pending, key)
	n.mu.Unlock()
	for i, p := range ps {
		if err := n.run(ctx, k, owner, p); err != nil && !errors.Is(err, dlock.ErrLeaseLost) && !errors.Is(err, errForgotten) {
			n.mu.Lock()
			n.pending[key] = append(ps[i:], n.pending[key]...)
			n.mu.Unlock()
			return fmt.Errorf("redislock: %w: %w", ErrUnsettled, err)
		}
	}
	return nil
}

// Pending returns how many uncertain releases and cancels of owner's holds
// of k the node remembers, to send again.
func (n *Node) Pending(k Keys, owner string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.pending[pendingKeyOf(k, owner)])
}
