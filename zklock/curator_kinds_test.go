package zklock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
)

// curatorKinds starts a ZooKeeper and, on it, testdata/CuratorKinds.java
// (an Apache Curator InterProcessReadWriteLock on /interop/rw and an
// InterProcessSemaphoreV2 of 2 leases on /interop/sem, driven line by line)
// and a dlock driver.
func curatorKinds(t *testing.T) (*curator, driver.Driver) {
	t.Helper()
	srv := testserver.ZooKeeper(t)
	cur := startCuratorProgram(t, "testdata/CuratorKinds.java", srv.Addr(), "/interop/rw", "/interop/sem", "2")
	return cur, zklock.Driver(drivertest.Client(t, &harness{addr: srv.Addr()}))
}

func (c *curator) must(cmd, want string) {
	c.t.Helper()
	if got := c.send(cmd, 20*time.Second); got != want {
		c.t.Fatalf("curator %s: %q; want %q", cmd, got, want)
	}
}

// Curator's InterProcessReadWriteLock and dlock's read-write lock on one
// path: readers of both hold at once, and a writer of either excludes the
// other's readers and writers, each waiter getting its hold on release.
func TestCuratorRWInterop(t *testing.T) {
	cur, d := curatorKinds(t)
	const name = "interop/rw"

	// Both read at once.
	cur.must("rlock", "locked")
	r := drivertest.MustHold(t, d, name, driver.Shared, 0)
	drivertest.WantRefused(t, d, name, driver.Write, 0)
	cur.must("tryw 300", "busy")
	cur.must("runlock", "unlocked")
	// dlock reads: a Curator writer waits for it and gets the lock on release.
	cur.must("tryw 100", "busy") // leaves nothing behind
	cur.queue("wlock")
	// The queued Curator writer keeps a new dlock reader out.
	drivertest.WantRefused(t, d, name, driver.Shared, 0)
	r.Release(t)
	cur.expect("locked", 10*time.Second)
	// Curator writes: dlock readers and writers are refused, then a waiting
	// dlock writer gets it on release.
	drivertest.WantRefused(t, d, name, driver.Shared, 0)
	drivertest.WantRefused(t, d, name, driver.Write, 0)
	w := drivertest.WaitHold(t, d, name, driver.Write, 0)
	drivertest.WantNotYet(t, w, "a dlock writer while Curator writes")
	cur.must("wunlock", "unlocked")
	wh := drivertest.WantGranted(t, w, "the dlock writer")
	// dlock writes: Curator readers and writers are refused, then a waiting
	// Curator reader gets it on release.
	cur.must("tryr 300", "busy")
	cur.must("tryw 300", "busy")
	cur.queue("rlock")
	wh.Release(t)
	cur.expect("locked", 10*time.Second)
	r2 := drivertest.MustHold(t, d, name, driver.Shared, 0) // and reads beside it
	r2.Release(t)
	cur.must("runlock", "unlocked")
}

// Curator's InterProcessSemaphoreV2 leases and dlock's permits count
// against one limit, and a waiter of either gets a permit when the other
// returns one.
func TestCuratorSemaphoreInterop(t *testing.T) {
	cur, d := curatorKinds(t)
	const name = "interop/sem"

	cur.must("acquire", "leased")
	p := drivertest.MustHold(t, d, name, driver.Permit, 2)
	// Full: both are refused.
	drivertest.WantRefused(t, d, name, driver.Permit, 2)
	cur.must("tryacquire 300", "busy")
	// A dlock waiter gets the permit Curator returns.
	w := drivertest.WaitHold(t, d, name, driver.Permit, 2)
	drivertest.WantNotYet(t, w, "a third permit")
	cur.must("return", "returned")
	p2 := drivertest.WantGranted(t, w, "the dlock permit after Curator's return")
	// A Curator waiter gets the permit dlock returns.
	cur.queue("acquire")
	drivertest.WantRefused(t, d, name, driver.Permit, 2)
	p.Release(t)
	cur.expect("leased", 10*time.Second)
	drivertest.WantRefused(t, d, name, driver.Permit, 2)
	info, err := d.(driver.KindInspector).InspectKind(t.Context(), name, driver.Permit)
	if err != nil || len(info.Holders) != 2 || info.Limit != 2 {
		t.Fatalf("InspectKind = %+v, %v; want 2 holders, limit 2", info, err)
	}
	p2.Release(t)
	cur.must("return", "returned")
}
