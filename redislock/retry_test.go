package redislock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// TestRetriedScriptsApplyOnce: go-redis sends a command again when its
// reply is lost (MaxRetries defaults to 3), so each script must do its work
// once even when it runs twice. An acquire run twice must not count two
// holds (the lock would outlive Unlock), and a release of one of two holds
// run twice must not free the lock while the other is held (a double grant).
func TestRetriedScriptsApplyOnce(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &scriptDropper{}
	c, other := openDialer(t, srv, drop.dial, true), openDialer(t, srv, nil, true)
	free := func(name string) bool {
		t.Helper()
		return tryFree(t, other.Mutex(name).TryLock)
	}

	// Load the scripts first: a reply lost to NOSCRIPT would test nothing.
	l, err := c.Mutex("retry/warm").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("acquire", func(t *testing.T) {
		m := c.Mutex("retry/acquire")
		drop.arm("reply")
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if drop.drops.Load() != 1 {
			t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
		}
		info, err := other.Inspect(ctx, "retry/acquire")
		if err != nil {
			t.Fatal(err)
		}
		if info.Holds != 1 || info.Token != l.Token() {
			t.Errorf("store has %d holds with token %d; want 1 hold with the lease's token %d", info.Holds, info.Token, l.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if !free("retry/acquire") {
			t.Error("the lock is still held after its only lease was unlocked: the retried acquire counted a second hold")
		}
	})

	t.Run("release", func(t *testing.T) {
		m := c.Mutex("retry/release", dlock.WithOwner(dlock.NewOwnerID()))
		retriedReleaseKeepsOther(t, drop, m.Lock, func() bool { return free("retry/release") })
	})
}

// tryFree reports whether try, another client's TryLock, gets the lock,
// which it then lets go; an error but ErrNotAcquired fails t.
func tryFree(t *testing.T, try func(context.Context) (*dlock.Lease, error)) bool {
	t.Helper()
	l, err := try(t.Context())
	if errors.Is(err, dlock.ErrNotAcquired) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(t.Context())
	return true
}

// retriedReleaseKeepsOther: take twice by one owner (re-entry: two holds in
// the store), then unlock the first with its reply dropped, so go-redis runs
// the release script again. The retried release must leave the other hold
// (free, another client's try, fails), and once that is unlocked too the
// lock is free.
func retriedReleaseKeepsOther(t *testing.T, drop *scriptDropper, take func(context.Context) (*dlock.Lease, error), free func() bool) {
	t.Helper()
	ctx := t.Context()
	drop.drops.Store(0)
	l1, err := take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := take(ctx) // re-entry: two holds in the store
	if err != nil {
		t.Fatal(err)
	}
	drop.arm("reply")
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if drop.drops.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
	}
	if free() {
		t.Error("another client took the lock while a lease on it was held: the retried release dropped both holds")
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Error(err)
	}
	if !free() {
		t.Error("the lock is still held after both leases were unlocked")
	}
}
