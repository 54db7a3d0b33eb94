package dlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// A polling wait's attempt that is under way when ctx ends, and takes the
// lock because the holder let go meanwhile, must not make Lock succeed:
// Lock promises ctx's error and nothing left in the store when ctx ends
// first. Most stores' requests cannot be called back once sent (CI saw
// this on Memcached, in drivertest's CancelledWaitTakesNothing).
func TestGrantAfterCancelGivenBack(t *testing.T) {
	for _, owner := range []string{"", "shared-owner"} {
		t.Run("owner="+owner, func(t *testing.T) {
			d := newFake()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var n atomic.Int64
			d.acquire = func(_ context.Context, req driver.Request) (driver.Grant, error) {
				if n.Add(1) == 1 { // held by another: the call waits
					return driver.Grant{Retry: 5 * time.Millisecond}, nil
				}
				cancel() // the caller gives up while this attempt is in flight
				return storeAcquire(d, req)
			}
			c := New(d, "fake")
			defer c.Close()
			var opts []Option
			if owner != "" {
				opts = append(opts, WithOwner(owner))
			}
			l, err := c.Mutex("cancelled/grant", opts...).Lock(ctx)
			if err == nil {
				_ = l.Unlock(t.Context())
				t.Fatal("Lock returned the lock taken after its ctx ended; want context.Canceled")
			}
			if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("Lock = %v; want context.Canceled and ErrNotAcquired", err)
			}
			d.mu.Lock()
			_, held := d.locks["cancelled/grant"]
			d.mu.Unlock()
			if held {
				t.Fatal("the grant Lock did not return is still held in the store")
			}
		})
	}
}
