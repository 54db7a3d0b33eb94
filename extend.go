package dlock

import (
	"context"
	"time"
)

// Extend asks the store, checking that the lease still holds the lock, to
// keep it for ttl from now, and on success moves the lease's expiry there
// (longer or shorter). Stores that count re-entries across processes
// (Redis, Redlock, Memcached, SQL table mode, mem) never move a hold's
// expiry earlier, since other leases of a re-entered hold may count on it:
// there a shorter Extend shortens the lease, and the store may keep the
// hold until its later expiry. It is for fixed leases (WithoutRenewal): a fixed lease
// stays fixed, at its new length. A renewing lease is extended too, but its
// watchdog goes on renewing it by its own TTL. Where holds live as long as a
// store session (etcd, ZooKeeper), the session's TTL bounds the extension:
// TimeLeft tells what was kept. It returns an error wrapping ErrLeaseLost if
// the store says the lease is gone (the lease then ends), ErrInvalidTTL for a
// TTL the backend cannot keep, and the store's error if the answer was
// uncertain: the lease then keeps its expiry, or the new one if that is
// earlier, since the store may have applied it. Where a connection holds
// the lock (the SQL row and session modes), a statement cut short by its
// ctx closes the connection, which frees the lock: there an Extend whose
// ctx ends mid-call lets its statement run on for a third of the TTL, at
// most a second, and returns then; cut short after that, it ends the lease.
// Concurrent Extends, or an
// Extend and a watchdog renewal, that overlap keep the earliest expiry
// either could have left in the store.
// A success confirmed only after the lease's loss deadline counts for
// nothing, as a late renewal does: Extend then returns an error wrapping
// ErrLeaseLost and the lease ends.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if l.none() {
		return nilLease("extend")
	}
	return extend(ctx, l, ttl)
}
