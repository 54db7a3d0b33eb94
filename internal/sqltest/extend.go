package sqltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// ExtendOutlastsGrantTTL: a fixed lease extended well past its grant's TTL
// keeps the lock for the whole extension. Row and session modes hold the
// lock by a session the server ends once it has been idle for the lease's
// TTL; the bound stayed the grant's, so the server freed the lock and a
// waiter got it while the extended lease ran (two holders; found by the
// conformance suite's Extend with a waiter).
func ExtendOutlastsGrantTTL(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			const ttl = time.Second
			a, b := be.open(t, mode), be.open(t, mode)
			la, err := a.Mutex("extend-bound", dlock.WithTTL(ttl), dlock.WithoutRenewal()).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := la.Extend(ctx, 5*ttl); err != nil {
				t.Fatal(err)
			}
			// The waiter gives up at 3 TTLs, while the lease still has two.
			wctx, cancel := context.WithTimeout(ctx, 3*ttl)
			defer cancel()
			lb, err := b.Mutex("extend-bound", dlock.WithTTL(ttl)).Lock(wctx)
			if err == nil {
				t.Fatalf("waiter granted (token %d) while the extended lease has %v left (Err %v): two holders",
					lb.Token(), la.TimeLeft().Round(100*time.Millisecond), la.Err())
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("waiter: %v; want its ctx's deadline", err)
			}
			if err := la.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of the extended lease: %v", err)
			}
		})
	}
}
