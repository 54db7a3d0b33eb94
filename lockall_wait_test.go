package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Finding 1: LockAll returned a Group (nil error) with a member that had
// been lost while LockAll waited for a later member. "Locks every one of
// lockers, or none: it blocks until all are held" must mean: when LockAll
// returns nil error, every member is held at that moment.
func TestAdvLockAllMemberLostWhileWaiting(t *testing.T) {
	a, b := twoClients(t)
	ctx := t.Context()
	// Another holder keeps "lockall/b" for ~1s.
	other, err := b.Mutex("lockall/b").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(time.Second)
		_ = other.Unlock(context.Background())
	}()
	// "lockall/a" is taken first (name order) with a short lease that is not
	// renewed: it runs out while LockAll waits for "lockall/b".
	short := a.Mutex("lockall/a", dlock.WithTTL(200*time.Millisecond), dlock.WithoutRenewal())
	long := a.Mutex("lockall/b")
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := dlock.LockAll(wctx, long, short)
	if err != nil {
		if !errors.Is(err, dlock.ErrLeaseLost) && !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("LockAll: unexpected error %v", err)
		}
		// Nothing may be left held: both names are free for another client.
		for _, n := range []string{"lockall/a", "lockall/b"} {
			l, err := b.Mutex(n).TryLock(ctx)
			if err != nil {
				t.Fatalf("%s left held after a failed LockAll: %v", n, err)
			}
			_ = l.Unlock(ctx)
		}
		return
	}
	defer g.Unlock(context.Background())
	if err := g.Err(); err != nil {
		t.Fatalf("LockAll returned a group whose member is not held: %v", err)
	}
	select {
	case <-g.Done():
		t.Fatal("LockAll returned a group already done")
	default:
	}
}

// Finding 4: on stores that keep waiting records for read-write locks
// (memlock, and pglock/mysqllock table mode through sqlbase.Decide), a
// refused TryLock leaves a waiting writer's record for up to 2s, and every
// TryLock is a holder (owner) of its own. A caller polling TryLock more
// often than every 2s is therefore always behind its own previous attempt:
// it never gets a lock that nobody holds (a blocking Lock keeps one owner
// and one record across its attempts, so it is not affected).
func TestAdvTryLockPollingGetsFreeLock(t *testing.T) {
	a, b := twoClients(t)
	ctx := t.Context()
	h, err := a.RWMutex("poll").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		_ = h.Unlock(context.Background())
	}()
	rw := b.RWMutex("poll")
	deadline := time.Now().Add(15 * time.Second)
	for tries := 1; time.Now().Before(deadline); tries++ {
		if l, err := rw.TryLock(ctx); err == nil {
			_ = l.Unlock(ctx)
			return
		} else if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatal("TryLock polled every 300ms never got the write lock, free since 500ms")
}

// Types of the caller's that embed a *Mutex or *RWMutex, which
// NamedLocker admits.
type wrappedMutex struct{ *dlock.Mutex }
type wrappedRWMutex struct{ *dlock.RWMutex }

// A Mutex and an RWMutex of one name are two locks, ordered by family; a
// type of the caller's embedding one was ordered as neither (no backend, the
// Mutex's family), so the two groups below took the two locks in opposite
// orders and deadlocked (an adversary's finding, within a few rounds).
func TestLockAllOrdersWrappedLocks(t *testing.T) {
	c, err := dlock.Open(t.Context(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, rw := c.Mutex("x"), c.RWMutex("x")
	for round := 0; round < 200; round++ {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		errs := make(chan error, 2)
		for _, group := range [][]dlock.NamedLocker{{m, wrappedRWMutex{rw}}, {wrappedMutex{m}, rw}} {
			go func() {
				g, err := dlock.LockAll(ctx, group...)
				if err == nil {
					err = g.Unlock(context.Background())
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				cancel()
				t.Fatalf("round %d: %v (the groups deadlocked)", round, err)
			}
		}
		cancel()
	}
}
