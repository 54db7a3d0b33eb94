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

// ExtendCtxEndsMidStatement: an Extend whose ctx ends while its statement
// is on the wire does not end the lease. Both client libraries close a
// connection whose statement's ctx ends mid-statement, which freed the
// lock (the lease ended with ErrLeaseLost, a waiter could take the lock):
// a caller's request ctx that ended during an Extend cost it the lock. The
// statement now gets sqlbase.Grace more (here a second) to finish; on a
// link of 200 ms a round trip it does.
func ExtendCtxEndsMidStatement(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			const ttl = 3 * time.Second
			px, a := be.openVia(t, mode)
			b := be.open(t, mode)
			for _, ext := range []time.Duration{ttl, 2 * ttl} { // the same TTL; a longer one, which sets bounds
				l, err := a.Mutex("extend-ctx", dlock.WithTTL(ttl)).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				px.SetDelay(100 * time.Millisecond)
				ectx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				err = l.Extend(ectx, ext)
				cancel()
				px.SetDelay(0)
				if errors.Is(err, dlock.ErrLeaseLost) || l.Err() != nil {
					t.Fatalf("Extend(%v) whose ctx ended mid-statement: %v; lease: %v", ext, err, l.Err())
				}
				if lb, err := b.Mutex("extend-ctx", dlock.WithTTL(ttl)).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
					if err == nil {
						_ = lb.Unlock(ctx)
					}
					t.Fatalf("another client's TryLock after the Extend: %v, want ErrNotAcquired", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatalf("Unlock after an Extend whose ctx ended mid-statement: %v", err)
				}
			}
		})
	}
}
