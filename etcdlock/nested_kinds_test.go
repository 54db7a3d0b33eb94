package etcdlock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A lock's queue is its direct children "<name>/<lease>" only, though etcd
// reads every key under "<name>/", the keys of the locks named under it
// included. So a holder of "orders/sku-42" does not hold "orders", and the
// election "svc" does not report the holder of the Mutex "svc/worker" as
// its leader. (It was an adversary's finding; see TestSubNamesAreOtherLocks.)
func TestNestedNamesAreIndependent(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := t.Context()
	u := "etcd://" + srv.Addr()
	a, b := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)

	child, err := a.Mutex("orders/sku-42").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Unlock(ctx)
	if l, err := b.Mutex("orders").TryLock(ctx); err != nil {
		t.Errorf("Mutex %q refused while only %q is held: %v", "orders", "orders/sku-42", err)
	} else {
		_ = l.Unlock(ctx)
	}
	if info, err := b.Inspect(ctx, "orders"); err != nil {
		t.Error(err)
	} else if info.Held {
		t.Errorf("Inspect(%q) reports a holder (%q, token %d) while only %q is held", "orders", info.Owner, info.Token, "orders/sku-42")
	}

	w, err := a.Mutex("svc/worker").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)
	if ld, err := b.Election("svc").Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("election %q with no candidate: Leader = %+v, %v; want ErrNoLeader", "svc", ld, err)
	}
}

// Finding 5: a permit re-entered with another permit count. The stores
// that count holds (mem, Redis, SQL) refuse it with ErrLimitMismatch; on
// etcd (and ZooKeeper) re-entry is kept by dlock within the client, which
// did not compare the counts and returned a lease on the one-permit
// semaphore to a caller that asked for a three-permit one.
func TestPermitReentryWithOtherCount(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := t.Context()
	c := drivertest.MustOpen(t, "etcd://"+srv.Addr())
	p1, err := c.Semaphore("adv/lim", 1, dlock.WithOwner("o")).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Unlock(ctx)
	if p, err := c.Semaphore("adv/lim", 3, dlock.WithOwner("o")).Acquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
		if p != nil {
			_ = p.Unlock(ctx)
		}
		t.Errorf("owner re-entry with 3 permits into a 1-permit hold: %v, want ErrLimitMismatch", err)
	}
	if p, err := c.Semaphore("adv/lim", 3).Acquire(dlock.ContextWithLease(ctx, p1)); !errors.Is(err, dlock.ErrLimitMismatch) {
		if p != nil {
			_ = p.Unlock(ctx)
		}
		t.Errorf("ctx re-entry with 3 permits into a 1-permit hold: %v, want ErrLimitMismatch", err)
	}
}
