package sqltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
)

// UnlockCutsCheckShort: an Unlock whose ctx ends while a check of the
// holding connection (an Extend's here, a renewal's alike) waits on a
// blackholed network returns soon after its ctx, the lease ended. The
// release waited for the check, which ran until its own ctx, and a grace,
// ran out: for a renewal, past the lease's deadline, whatever the Unlock's
// ctx. Once the network is back, the lock is free again and nothing of the
// hold is left to block another client.
func UnlockCutsCheckShort(t *testing.T, be Backend) {
	for _, mode := range connModes {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			const ttl = 3 * time.Second
			px, a := be.openVia(t, mode)
			b := be.open(t, mode)
			l, err := a.Mutex("unlock-cut", dlock.WithTTL(ttl), dlock.WithoutRenewal()).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			px.Blackhole()
			extend := drivertest.Go(func() (struct{}, error) {
				ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				return struct{}{}, l.Extend(ectx, ttl)
			})
			time.Sleep(time.Second) // the Extend's check is on the wire, and unanswered
			unlock := drivertest.Go(func() (struct{}, error) {
				uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				return struct{}{}, l.Unlock(uctx)
			})
			// Generous for a 300 ms ctx; the check alone would have run 31 s.
			_, uerr := unlock.Result(t, 10*time.Second, "Unlock whose ctx ended while a check waited on a blackhole")
			if _, err := extend.Result(t, 10*time.Second, "the Extend cut short by the Unlock"); err == nil {
				t.Errorf("the Extend cut short by the Unlock succeeded; Unlock: %v; Err: %v", uerr, l.Err())
			}
			select {
			case <-l.Done():
			default:
				t.Fatalf("lease not ended after its Unlock returned %v", uerr)
			}
			if uerr != nil && !errors.Is(uerr, dlock.ErrLeaseLost) {
				t.Errorf("Unlock: %v; want nil or ErrLeaseLost", uerr)
			}
			// The server frees what the cut connection held: at once, or, as
			// the blackhole hid the close, once the session's idle bound (about
			// a TTL) has run out.
			lctx, cancel := context.WithTimeout(ctx, 5*ttl)
			defer cancel()
			lb, err := b.Mutex("unlock-cut", dlock.WithTTL(ttl)).Lock(lctx)
			if err != nil {
				t.Fatalf("another client's Lock after the cut Unlock: %v", err)
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
