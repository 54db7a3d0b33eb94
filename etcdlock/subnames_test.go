package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
)

// The keys of the lock "n/x" ("n/x/<lease>") lie under the prefix of the
// lock "n" ("n/"). dlock reads only the direct children "n/<lease>" as the
// contenders of "n", so the holder of "n/x" (or of "n/x/y") neither blocks
// nor shows up in "n": TryLock, Lock (waiting behind "n"'s holder, not
// behind "n/x"'s), Inspect, List, ForceUnlock and an election's Leader.
// Before, "n" queued behind "n/x", Inspect("n") reported "n/x"'s holder,
// and ForceUnlock("n") deleted "n/x"'s key. More than a page of keys of
// names under "n" lie before the holder's key and between it and the
// waiter's, so the reads of "n"'s queue go past their first page.
func TestSubNamesAreOtherLocks(t *testing.T) {
	u := "etcd://" + testserver.Etcd(t).Addr()
	a, b, c := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)
	ctx := t.Context()
	n := "subnames-" + dlock.NewOwnerID()
	long, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	sub, err := a.Mutex(n+"/x", dlock.WithTTL(10*time.Second), dlock.WithLabel("sub")).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Mutex(n+"/x/y", dlock.WithTTL(10*time.Second)).TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	subs := 0
	holdSubs := func() { // more than a page of keys under n/
		for range etcdlock.PageSize + 2 {
			if _, err := a.Mutex(fmt.Sprintf("%s/s%d", n, subs), dlock.WithTTL(10*time.Second)).TryLock(ctx); err != nil {
				t.Fatal(err)
			}
			subs++
		}
	}
	holdSubs()
	if info, err := b.Inspect(ctx, n); err != nil || info.Held {
		t.Errorf("Inspect(%q) with only %q held = %+v, %v; want not held", n, n+"/x", info, err)
	}
	if l, err := b.Election(n).Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Errorf("Leader(%q) with only %q held = %+v, %v; want no leader", n, n+"/x", l, err)
	}
	if err := b.ForceUnlock(ctx, n); err != nil {
		t.Fatal(err)
	}
	if info, err := b.Inspect(ctx, n+"/x"); err != nil || !info.Held || info.Label != "sub" {
		t.Fatalf("after ForceUnlock(%q), Inspect(%q) = %+v, %v; want it still held", n, n+"/x", info, err)
	}

	// b holds n; c waits for it, queued after the keys of n/x and n/x/y.
	held, err := b.Mutex(n, dlock.WithTTL(10*time.Second), dlock.WithLabel("b")).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock(%q) with %q held: %v", n, n+"/x", err)
	}
	holdSubs()
	got := make(chan error, 1)
	go func() {
		l, err := c.Mutex(n, dlock.WithTTL(10*time.Second)).Lock(long)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	var info dlock.Info
	for info.Waiters == 0 && long.Err() == nil {
		time.Sleep(10 * time.Millisecond) // polls for the waiter; not a timing assertion
		info, err = b.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !info.Held || info.Label != "b" || info.Waiters != 1 {
		t.Errorf("Inspect(%q) = %+v; want b's hold (label b) and 1 waiter, not counting %q's keys", n, info, n+"/x")
	}
	infos, err := b.List(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name == n && (i.Label != "b" || i.Waiters != 1) {
			t.Errorf("List: %q = %+v; want b's hold and 1 waiter", n, i)
		}
	}
	if len(infos) != 3+subs {
		t.Errorf("List(%q) = %d locks; want %d: n, n/x, n/x/y and n/s0… n/s%d", n, len(infos), 3+subs, subs-1)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("Lock(%q) waiting behind its holder, with %q held: %v; want the lock once the holder unlocks", n, n+"/x", err)
	}
	if err := sub.Extend(ctx, 10*time.Second); err != nil {
		t.Errorf("the hold of %q after the dance on %q: %v", n+"/x", n, err)
	}
}
