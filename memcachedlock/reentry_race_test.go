package memcachedlock_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestNestedLockRacingUnlock: a nested Lock racing its hold's last Unlock
// (fixed owner) gets a lease or nothing, never an error, and once every
// lease is unlocked another client gets the lock at once. The Unlock may
// delete the item between the re-entry's gets and its cas, which
// gomemcache reports as a cache miss: the re-entry must look again, not
// fail with it (an adversary pass saw it fail in about one round in ten).
func TestNestedLockRacingUnlock(t *testing.T) {
	url := "memcached://" + testserver.Memcached(t).Addr()
	a, b := drivertest.MustOpen(t, url), drivertest.MustOpen(t, url)
	ctx := t.Context()
	for round := range 200 {
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
			time.Sleep(time.Duration(rand.N(400)) * time.Microsecond) // either may come first
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
