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
func TestLockAllSameLockTwoSpellings(t *testing.T) {
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
