package zklock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// Finding 3: zklock drops a leading "/" from a name, so "/a" and "a" are one
// lock in the store, but LockAll orders and de-duplicates the names as
// given. LockAll("/a", "a") then waits for itself until ctx ends instead of
// refusing the name given twice, and two callers locking {"/b", "a"} and
// {"a", "b"} take the same two locks in opposite orders: a deadlock.
func TestAdvZKLockAllSameLockTwoSpellings(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	c := directClient(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	g, err := dlock.LockAll(ctx, c.Mutex("/adv/a"), c.Mutex("adv/a"))
	if err == nil {
		_ = g.Unlock(context.Background())
		return // one lock taken once: fine too
	}
	if !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf(`LockAll("/adv/a", "adv/a") (one lock on ZooKeeper) waited for itself: %v`, err)
	}
}

// Cancelled permit waiters must leave nothing behind: with one permit, a
// holder, and waiters whose ctx ends while they wait, the permit is free
// again for a try once the holder unlocks.
func advCancelledPermitWaiters(t *testing.T, a, b *dlock.Client) {
	ctx := t.Context()
	h, err := a.Semaphore("adv/sem", 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(300+200*i)*time.Millisecond)
		if l, err := b.Semaphore("adv/sem", 1).Acquire(wctx); err == nil {
			cancel()
			t.Fatalf("second permit of one granted (token %d)", l.Token())
		}
		cancel()
	}
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l, err := b.Semaphore("adv/sem", 1).TryAcquire(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("permit not free after the holder left and the waiters gave up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestAdvZKCancelledPermitWaiters(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	advCancelledPermitWaiters(t, directClient(t, srv.Addr()), directClient(t, srv.Addr()))
}

// A writer that gives up waiting must not keep later readers out: once its
// ctx ends, a new reader gets in beside the reader that held all along.
func advCancelledWriterFreesReaders(t *testing.T, a, b *dlock.Client) {
	ctx := t.Context()
	r, err := a.RWMutex("adv/rw").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	if w, err := b.RWMutex("adv/rw").Lock(wctx); err == nil {
		cancel()
		t.Fatalf("writer granted beside a reader (token %d)", w.Token())
	}
	cancel()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r2, err := b.RWMutex("adv/rw").RLock(rctx)
	if err != nil {
		t.Fatalf("reader kept out by a writer that gave up: %v", err)
	}
	_ = r2.Unlock(ctx)
}

func TestAdvZKCancelledWriter(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	advCancelledWriterFreesReaders(t, directClient(t, srv.Addr()), directClient(t, srv.Addr()))
}
