package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Release deletes the holder's key by name alone while the client's slot
// for the name is still the hold's. A renewal that finds the key gone frees
// the slot at once, so the client's next contender puts the same key (it is
// named after the session lease) while the portable layer may still be
// releasing the lost hold: that late Release must not take the newer
// holder's key.
func TestReleaseAfterLossTakesNoNewerKey(t *testing.T) {
	addr := testserver.Etcd(t).Addr()
	c := drivertest.MustOpen(t, "etcd://"+addr)
	drv := etcdlock.DriverOf(c)
	ctx := t.Context()
	req := driver.Request{Name: "release-after-loss", Owner: "o1", TTL: 10 * time.Second, Wait: true}

	g1, err := drv.Acquire(ctx, req)
	if err != nil || !g1.Acquired {
		t.Fatalf("first Acquire = %+v, %v", g1, err)
	}
	h1 := driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Token: g1.Token, Handle: g1.Handle}
	key := g1.Handle.(*etcdlock.Lease).Key

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Delete(ctx, key); err != nil { // an operator's force release
		t.Fatal(err)
	}
	if res := drv.Renew(ctx, []driver.Held{h1}); !errors.Is(res[0].Err, dlock.ErrLeaseLost) {
		t.Fatalf("Renew after the key was deleted = %v; want ErrLeaseLost", res[0].Err)
	}

	req.Owner = "o2"
	g2, err := drv.Acquire(ctx, req)
	if err != nil || !g2.Acquired {
		t.Fatalf("second Acquire = %+v, %v", g2, err)
	}
	defer func() {
		_ = drv.Release(ctx, driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Token: g2.Token, Handle: g2.Handle}, 1)
	}()
	if k2 := g2.Handle.(*etcdlock.Lease).Key; k2 != key {
		t.Fatalf("second contender's key %q, want the same key %q (same session)", k2, key)
	}

	if err := drv.Release(ctx, h1, 1); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Errorf("late Release of the lost hold = %v; want ErrLeaseLost", err)
	}
	resp, err := cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || uint64(resp.Kvs[0].CreateRevision) != g2.Token {
		t.Fatalf("after the lost hold's Release, the newer holder's key is %v; want it kept (create revision %d)", resp.Kvs, g2.Token)
	}
}
