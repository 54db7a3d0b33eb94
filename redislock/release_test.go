package redislock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// TestFailedReleaseIsNotReentered: an Unlock whose release never reached the
// store leaves the hold there (until its TTL), and the client forgets it.
// The owner's next Lock must not re-enter that hold unknowingly (the store
// would count one hold more than the client, and the lock would outlive the
// next Unlock, again and again): the failed release is completed first.
func TestFailedReleaseIsNotReentered(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &scriptDropper{}
	c := openDialer(t, srv, drop.dial, false)
	other := openURL(t, srv)
	m := c.Mutex("failed-release", dlock.WithOwner(dlock.NewOwnerID())) // its next Lock is the same owner

	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop.arm("request")
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded though its release was dropped")
	}
	if info, err := other.Inspect(ctx, "failed-release"); err != nil {
		t.Fatal(err)
	} else if !info.Held {
		t.Fatal("the dropped release ran")
	}

	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := other.Inspect(ctx, "failed-release")
	if err != nil {
		t.Fatal(err)
	}
	if info.Holds != 1 || info.Token != l2.Token() || l2.Token() <= l.Token() {
		t.Errorf("the next Lock got token %d (the failed one's %d); the store has %d holds with token %d: want 1 new hold",
			l2.Token(), l.Token(), info.Holds, info.Token)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !tryFree(t, other.Mutex("failed-release").TryLock) {
		t.Fatal("the lock is still held after its only lease was unlocked")
	}
}

// failedReentry has an owner lock name through a client whose script calls
// go through a scriptDropper, then arms it with steps and re-enters: the
// re-entry must fail. It returns the first lease, the dropper, and another
// client of the same server to look at the store with.
func failedReentry(t *testing.T, name string, steps ...string) (*dlock.Lease, *scriptDropper, *dlock.Client) {
	t.Helper()
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &scriptDropper{}
	c := openDialer(t, srv, drop.dial, false)
	m := c.Mutex(name, dlock.WithOwner(dlock.NewOwnerID())) // the second Lock re-enters
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop.arm(steps...)
	if l2, err := m.Lock(ctx); err == nil {
		_ = l2.Unlock(ctx)
		t.Fatal("the re-entry succeeded though its reply was dropped")
	}
	return l, drop, openURL(t, srv)
}

// TestLostReentryIsUndone: a re-entry that ran in the store but whose reply
// was lost fails for the caller, so its hold must not stay counted (the
// lock would outlive the owner's last Unlock), and undoing it must drop
// that one hold, not the lock the owner still holds.
func TestLostReentryIsUndone(t *testing.T) {
	ctx := t.Context()
	const name = "lost-reentry"
	l, drop, other := failedReentry(t, name, "reply")
	if drop.drops.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
	}
	info, err := other.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holds != 1 || info.Token != l.Token() {
		t.Errorf("after the failed re-entry the store has %+v; want the first lease's 1 hold, token %d", info, l.Token())
	}
	if l.Err() != nil {
		t.Errorf("the first lease ended: %v", l.Err())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !tryFree(t, other.Mutex(name).TryLock) {
		t.Fatal("the lock is still held after its only lease was unlocked")
	}
}

// TestFailedCancelIsSentAgain: a re-entry that ran but lost its reply is
// undone by a cancel; if the cancel fails too, the store counts a hold the
// client does not have, so the cancel is sent again before the owner's next
// call on the lock, and the owner's last Unlock frees it.
func TestFailedCancelIsSentAgain(t *testing.T) {
	ctx := t.Context()
	const name = "failed-cancel"
	l, _, other := failedReentry(t, name, "reply", "request") // the re-entry's reply, then its cancel
	if info, err := other.Inspect(ctx, name); err != nil {
		t.Fatal(err)
	} else if info.Holds != 2 {
		t.Fatalf("the store has %d holds; want the lost re-entry's counted (2): the test did not drop what it meant to", info.Holds)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !tryFree(t, other.Mutex(name).TryLock) {
		info, _ := other.Inspect(ctx, name)
		t.Fatalf("the lock is still held after its only lease was unlocked: %+v", info)
	}
}

// TestRetriedReleaseActsOnceAfterOtherChanges: owners shared across
// processes count their holds in one hash. A release that ran but lost its
// reply is sent again later; if another process of the same owner changed
// the hold in between, the retry must still see that it ran, or it takes
// away a hold that is still held, and the lock is freed under a lease.
func TestRetriedReleaseActsOnceAfterOtherChanges(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &scriptDropper{}
	p1 := openDialer(t, srv, drop.dial, false)
	p2, admin := openURL(t, srv), openURL(t, srv)
	const name = "shared-owner"
	owner := dlock.WithOwner(dlock.NewOwnerID())
	m1, m2 := p1.Mutex(name, owner), p2.Mutex(name, owner)
	if w, err := p1.Mutex("warm").Lock(ctx); err != nil { // load the scripts: a lost NOSCRIPT tests nothing
		t.Fatal(err)
	} else if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	a, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m2.Lock(ctx) // the other process re-enters: 2 holds
	if err != nil {
		t.Fatal(err)
	}
	drop.arm("reply")
	if err := a.Unlock(ctx); err == nil { // runs (1 hold left), reply lost
		t.Fatal("Unlock succeeded though its reply was dropped")
	}
	if info, err := admin.Inspect(ctx, name); err != nil || info.Holds != 1 {
		t.Fatalf("after the release whose reply was lost: %+v, %v; want 1 hold", info, err)
	}
	c, err := m2.Lock(ctx) // the other process again: 2 holds
	if err != nil {
		t.Fatal(err)
	}
	d, err := m1.Lock(ctx) // settles the release, then re-enters: 3 holds
	if err != nil {
		t.Fatal(err)
	}
	info, err := admin.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Holds != 3 {
		t.Errorf("the store counts %d holds; the two processes hold 3 leases", info.Holds)
	}
	for _, l := range []*dlock.Lease{b, c} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another owner could take the lock while a lease on it is held: %v", err)
	}
	if err := d.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
