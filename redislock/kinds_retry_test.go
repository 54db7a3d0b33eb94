package redislock_test

import (
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// TestRetriedKindScriptsApplyOnce is TestRetriedScriptsApplyOnce for
// semaphores and read-write locks: a permit acquired by a script run twice
// is one permit, and the release of one of two read holds run twice leaves
// the other, so a writer stays out.
func TestRetriedKindScriptsApplyOnce(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &scriptDropper{}
	c, other := openDialer(t, srv, drop.dial, true), openDialer(t, srv, nil, true)
	// Load the scripts first: a reply lost to NOSCRIPT would test nothing.
	for _, name := range []string{"retry/warm-sem", "retry/warm-rw"} {
		l, err := c.Semaphore(name, 1).Acquire(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if l, err = c.RWMutex(name).RLock(ctx); err == nil {
			err = l.Unlock(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	t.Run("acquire", func(t *testing.T) {
		drop.drops.Store(0)
		const name = "retry/sem"
		drop.arm("reply")
		l, err := c.Semaphore(name, 1).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if drop.drops.Load() != 1 {
			t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
		}
		info, err := other.Semaphore(name, 1).Inspect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 1 || info.Holders[0].Holds != 1 || info.Holders[0].Token != l.Token() {
			t.Errorf("store has holders %+v; want 1 hold with the lease's token %d", info.Holders, l.Token())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := other.Semaphore(name, 1).TryAcquire(ctx)
		if err != nil {
			t.Fatalf("the permit is still taken after its only lease was unlocked: %v", err)
		}
		_ = p.Unlock(ctx)
	})

	t.Run("release", func(t *testing.T) {
		const name = "retry/rw"
		rw := c.RWMutex(name, dlock.WithOwner(dlock.NewOwnerID()))
		retriedReleaseKeepsOther(t, drop, rw.RLock, func() bool { return tryFree(t, other.RWMutex(name).TryLock) })
	})
}
