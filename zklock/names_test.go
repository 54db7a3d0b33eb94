package zklock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks, or refused: "/a" was the node of "a",
// and "p/_c_…-lock-0000000000" made Inspect("p") report a phantom holder
// (and TryLock of "p" fail) while it was held.
func TestDistinctNames(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	a, b := directClient(t, srv.Addr()), directClient(t, srv.Addr())
	drivertest.DistinctNames(t, a, b, drivertest.NamePairs("distinct-", 1, 40))

	held, err := a.Mutex("phantom/_c_0123-lock-0000000000").TryLock(t.Context())
	if err == nil {
		defer held.Unlock(t.Context())
	} else if !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatal(err)
	}
	info, err := a.Inspect(t.Context(), "phantom")
	if err != nil || info.Held {
		t.Errorf("Inspect(phantom) = %+v, %v; want not held", info, err)
	}
	if _, err := a.Mutex("/lead").TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidName) {
		t.Errorf(`TryLock("/lead") = %v; want ErrInvalidName`, err)
	}
}

// A Semaphore "s" keeps its mutex at s/locks and its permits under
// s/leases: a Mutex of either name is refused, of any kind of lock, where
// it kept the semaphore from granting, or counted as a permit and wiped the
// stored limit, so that a Semaphore("w", 5) was granted beside a permit of
// Semaphore("w", 2) (an adversary pass). Names under /zookeeper are refused
// as /zookeeper is. The semaphore itself, using those nodes, still works.
func TestSemaphoreNodesAreNotNames(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	a, b := directClient(t, srv.Addr()), directClient(t, srv.Addr())
	ctx := t.Context()
	for _, name := range []string{"w/locks", "w/leases", "w/leases/x", "a/b/locks", "zookeeper/quota", "zookeeper/x"} {
		if l, err := a.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrInvalidName) {
			if err == nil {
				_ = l.Unlock(ctx)
			}
			t.Errorf("Mutex(%q).TryLock: %v; want ErrInvalidName", name, err)
		}
		if l, err := a.RWMutex(name).TryRLock(ctx); !errors.Is(err, dlock.ErrInvalidName) {
			if err == nil {
				_ = l.Unlock(ctx)
			}
			t.Errorf("RWMutex(%q).TryRLock: %v; want ErrInvalidName", name, err)
		}
	}
	for _, name := range []string{"locks", "leases", "locksmith/x", "x/leases2"} { // first components, and other words, are names
		l, err := a.Mutex(name).TryLock(ctx)
		if err != nil {
			t.Fatalf("Mutex(%q): %v", name, err)
		}
		_ = l.Unlock(ctx)
	}
	p, err := a.Semaphore("w", 2).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Unlock(ctx)
	if l, err := b.Semaphore("w", 5).TryAcquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Errorf("Semaphore(w, 5) beside a permit of Semaphore(w, 2): %v; want ErrLimitMismatch", err)
	}
}

// A chroot ZooKeeper refuses was taken by Open, and every Lock then failed
// with "zk: invalid path" until its ctx ended; one that puts the client's
// nodes under /zookeeper, or at a node another client's lock would count,
// is refused too.
func TestBadChrootIsRefused(t *testing.T) {
	for _, u := range []string{
		"zk://127.0.0.1:1//double", "zk://127.0.0.1:1/a/../b", "zk://127.0.0.1:1/a/./b", "zk://127.0.0.1:1/%00",
		"zk://127.0.0.1:1/zookeeper", "zk://127.0.0.1:1/zookeeper/quota",
		"zk://127.0.0.1:1/x/_c_ab-lock-0000000001", "zk://127.0.0.1:1/s/leases",
	} {
		drivertest.WantInvalidURL(t, u, "", "chroot")
	}
}
