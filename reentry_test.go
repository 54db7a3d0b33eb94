package dlock_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	_ "github.com/dlock/dlock/memlock"
)

var sharedStores atomic.Int64

// twoClients opens two clients of one in-process store.
func twoClients(t *testing.T) (*dlock.Client, *dlock.Client) {
	t.Helper()
	u := fmt.Sprintf("mem://adversary-%d-%d", time.Now().UnixNano(), sharedStores.Add(1))
	a, err := dlock.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dlock.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// A re-entry with a shorter TTL than the hold's: where the store counts
// holds (memlock, like Redis and the SQL backends), the re-entry resets the
// store's expiry to its own TTL. The client must not go on believing in the
// hold's longer expiry: while both leases read live, no other client may
// get the lock.
func TestReentryWithShorterTTLKeepsExclusion(t *testing.T) {
	for _, how := range []string{"ctx", "owner"} {
		t.Run(how, func(t *testing.T) {
			a, b := twoClients(t)
			ctx := t.Context()
			var outerOpts, innerOpts []dlock.Option
			if how == "owner" {
				outerOpts = append(outerOpts, dlock.WithOwner("worker"))
				innerOpts = append(innerOpts, dlock.WithOwner("worker"))
			}
			outer, err := a.Mutex("reenter/short", append(outerOpts, dlock.WithTTL(10*time.Second))...).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer outer.Unlock(ctx)
			inner, err := a.Mutex("reenter/short", append(innerOpts, dlock.WithTTL(300*time.Millisecond))...).
				Lock(dlock.ContextWithLease(ctx, outer))
			if err != nil {
				t.Fatal(err)
			}
			defer inner.Unlock(ctx)
			if inner.Token() != outer.Token() {
				t.Fatalf("not a re-entry: tokens %d, %d", outer.Token(), inner.Token())
			}
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				l, err := b.Mutex("reenter/short").TryLock(ctx)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				// Held by b: a must know it lost the lock by now.
				if outer.Err() == nil || inner.Err() == nil {
					t.Errorf("another client got the lock while a's leases read live (outer Err %v, inner Err %v, TimeLeft %v)",
						outer.Err(), inner.Err(), outer.TimeLeft())
				}
				_ = l.Unlock(ctx)
				return
			}
		})
	}
}

// The leases of one hold share its renewal. A re-entry that asked for the
// other got the hold's without a word: a fixed lease re-entering a renewed
// hold was renewed for as long as the hold lived, and a renewed one
// re-entering a fixed hold ended at the fixed TTL (an adversary pass). It
// is refused, before the store counts it, and the hold goes on unharmed.
func TestReentryRenewalMismatch(t *testing.T) {
	for _, first := range []bool{true, false} {
		for _, how := range []string{"owner", "ctx"} {
			t.Run(fmt.Sprintf("renewed=%v/%s", first, how), func(t *testing.T) {
				a, b := twoClients(t)
				ctx := t.Context()
				owner := dlock.NewOwnerID()
				opts := func(renew bool) []dlock.Option {
					o := []dlock.Option{dlock.WithTTL(time.Second)}
					if how == "owner" {
						o = append(o, dlock.WithOwner(owner))
					}
					if !renew {
						o = append(o, dlock.WithoutRenewal())
					}
					return o
				}
				outer, err := a.Mutex("mixed", opts(first)...).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				rctx := ctx
				if how == "ctx" {
					rctx = dlock.ContextWithLease(ctx, outer)
				}
				inner, err := a.Mutex("mixed", opts(!first)...).Lock(rctx)
				if !errors.Is(err, dlock.ErrRenewalMismatch) {
					t.Fatalf("re-entry with the other renewal: %v, %v; want ErrRenewalMismatch", inner, err)
				}
				same, err := a.Mutex("mixed", opts(first)...).Lock(rctx)
				if err != nil {
					t.Fatalf("re-entry with the hold's renewal: %v", err)
				}
				if err := same.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if err := outer.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				l, err := b.Mutex("mixed").TryLock(ctx) // the refused re-entry left no count behind
				if err != nil {
					t.Fatalf("after the hold's last Unlock: %v", err)
				}
				_ = l.Unlock(ctx)
			})
		}
	}
}
