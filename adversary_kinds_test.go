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
