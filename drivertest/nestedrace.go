package drivertest

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// NestedLockRacingUnlock runs rounds in which a nested Lock on a (its ctx
// carries the outer lease, so it re-enters the hold) races the Unlock of
// that lease, the hold's last, under a fixed owner. The nested Lock must get
// a lease, never an error, and once every lease is unlocked, b must get the
// lock at once: the store keeps no count that nobody releases. maxLead
// bounds the random head start of the nested Lock.
func NestedLockRacingUnlock(t *testing.T, a, b *dlock.Client, rounds int, maxLead time.Duration) {
	t.Helper()
	ctx := t.Context()
	for round := range rounds {
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
			time.Sleep(rand.N(maxLead)) // either may come first
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
