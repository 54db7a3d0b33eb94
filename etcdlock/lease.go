package etcdlock

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease is the etcd view of a held lock, reached with dlock's Lease.As.
type Lease struct {
	Key      string           // the holder's key
	Revision int64            // its create revision (the fencing token)
	LeaseID  clientv3.LeaseID // the session lease it lives under

	name  string
	sess  *session
	free  func()
	mu    sync.Mutex
	state slotState
}

// slotState is where a Lease stands with the client's slot for its name.
type slotState uint8

const (
	slotHeld      slotState = iota // the hold keeps the slot
	slotReleasing                  // Release deletes the key and then frees the slot
	slotFreed                      // freed: the client's next contender may put the same key
)

// release frees the client's slot for the name, once, unless Release has
// claimed it (see claim): then Release frees it when its delete is done.
func (l *Lease) release() {
	l.mu.Lock()
	if l.state != slotHeld {
		l.mu.Unlock()
		return
	}
	l.state = slotFreed
	l.mu.Unlock()
	l.untrackAndFree()
}

// claim is Release's: it reports whether the slot is still the hold's, and
// if so keeps it so (release does nothing) until releaseClaimed. While the
// hold keeps the slot, no other contender of this client can put the key
// (it is named after the session lease, and contenders of other clients
// have leases of their own), so the key, if there, is this hold's.
func (l *Lease) claim() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != slotHeld {
		return false
	}
	l.state = slotReleasing
	return true
}

// releaseClaimed frees the slot that claim kept.
func (l *Lease) releaseClaimed() {
	l.mu.Lock()
	l.state = slotFreed
	l.mu.Unlock()
	l.untrackAndFree()
}

func (l *Lease) untrackAndFree() {
	l.sess.untrack(l)
	l.free()
}

// IsOwner is a comparison that holds while this lease holds the lock: put it
// in the If of a transaction to write to etcd only as the holder.
func (l *Lease) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.Key), "=", l.Revision)
}

// As sets **Lease targets.
func (l *Lease) As(target any) bool {
	if p, ok := target.(**Lease); ok {
		*p = l
		return true
	}
	return false
}
