package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A key put directly under "n/" by another program (etcdctl put n/foo bar,
// no lease) is a direct child, so it holds "n" for dlock: Inspect and
// TryLock say so. List is the place an operator looks for what holds a
// lock: it should show "n" held too (or Inspect/TryLock should ignore the
// key as List does). List skips any key whose last part is not hex.
// A key put under "n/" by another program (etcdctl put n/foo bar: no
// lease, so nothing would ever delete it) is not a lock contender: no etcd
// lock layout names a contender other than by a lease id in hex. Inspect,
// TryLock and List agree that "n" is free. (Before, Inspect and TryLock took
// it for a holder that never ends, while List left it out.)
func TestForeignKeyUnderANameHoldsNothing(t *testing.T) {
	srv := testserver.Etcd(t)
	u := "etcd://" + srv.Addr()
	b := drivertest.MustOpen(t, u)
	ctx := t.Context()
	n := "foreign-" + dlock.NewOwnerID()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + srv.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, n+"/foo", "bar"); err != nil {
		t.Fatal(err)
	}
	defer cli.Delete(context.WithoutCancel(ctx), n+"/foo")
	info, err := b.Inspect(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	l, tryErr := b.Mutex(n).TryLock(ctx)
	if tryErr == nil {
		_ = l.Unlock(ctx)
	}
	infos, err := b.List(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, i := range infos {
		listed = listed || i.Name == n && i.Held
	}
	if info.Held || tryErr != nil || listed {
		t.Errorf("a foreign key %q: Inspect(%q).Held = %v, TryLock err = %v, List shows it held = %v; want the lock free in all three",
			n+"/foo", n, info.Held, tryErr, listed)
	}
}
