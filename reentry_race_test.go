package dlock_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
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
	ctx := t.Context()
	for round := range 500 {
		name := "nested-race/" + dlock.NewOwnerID()
		m := a.Mutex(name, dlock.WithOwner(dlock.NewOwnerID()), dlock.WithTTL(time.Minute))
		outer, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var nested *dlock.Lease
		var nerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); nested, nerr = m.Lock(dlock.ContextWithLease(ctx, outer)) }()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.N(50)) * time.Microsecond) // either may come first
			if err := outer.Unlock(ctx); err != nil {
				t.Errorf("round %d: outer Unlock: %v", round, err)
			}
		}()
		wg.Wait()
		if nerr != nil {
			t.Fatalf("round %d: nested Lock racing the outer Unlock = %v", round, nerr)
		}
		if err := nested.Unlock(ctx); err != nil {
			t.Fatalf("round %d: nested Unlock: %v", round, err)
		}
		l, err := b.Mutex(name).TryLock(ctx)
		if err != nil {
			info, _ := b.Inspect(ctx, name)
			t.Fatalf("round %d: every lease unlocked, yet TryLock = %v; the store has %+v", round, err, info)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
