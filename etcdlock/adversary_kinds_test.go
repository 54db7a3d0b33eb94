package etcdlock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// Finding 2: on etcd a lock's queue is every key under "<prefix><name>/",
// which also holds the keys of every lock whose name starts with
// "<name>/". A holder of "orders/sku-42" therefore holds "orders" too: a
// Mutex "orders" is refused (or waits) although nobody holds it, and the
// election "svc" reports the holder of the Mutex "svc/worker" as its
// leader, with that holder's owner id and label as the leader's value.
func TestAdvEtcdNestedNamesAreIndependent(t *testing.T) {
	t.Skip("finding 2: nested names share a queue on etcd (etcd's own Mutex layout); see the adversary report")
	srv := testserver.Etcd(t)
	ctx := t.Context()
	open := func() *dlock.Client {
		c, err := dlock.Open(ctx, "etcd://"+srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := open(), open()

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
