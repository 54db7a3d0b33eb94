package dlock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
)

// TestNestedLockRacingLastUnlock: a nested Lock (it re-enters the hold of
// the lease its ctx carries, and the store counts it) races the Unlock of
// that lease, the hold's last, under a fixed owner. Whichever wins, once
// every lease the client returned is unlocked, the store must hold nothing:
// another client gets the lock at once. Found by an adversary pass: a
// re-entry counted in the store after the Unlock had found its lease the
// last one either joined a hold being released or came back to a detached
// hold without giving its count back, and the lock stayed held until its
// TTL under an owner that no longer held it.
func TestNestedLockRacingLastUnlock(t *testing.T) {
	a, b := twoClients(t)
	drivertest.NestedLockRacingUnlock(t, a, b, 500, 50*time.Microsecond)
}
