package dlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A Lock whose store never answers, ended by its ctx, matches
// ErrNotAcquired and ctx's error as every given-up Lock does, but does not
// say the lock is "held by another owner": nobody answered that. It says
// what the store did. (It used to read "lock not acquired: held by another
// owner: context deadline exceeded", found by a fault run.)
func TestUnreachableStoreIsNotHeldByAnother(t *testing.T) {
	d := newFake()
	d.cut.Store(true)
	c := New(d, "fake", quiet())
	defer c.Close()
	for _, blocking := range []bool{false, true} {
		d.caps.Blocking = blocking
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := c.Mutex("unreachable").Lock(ctx)
		cancel()
		if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("blocking=%v: Lock = %v; want ErrNotAcquired and DeadlineExceeded", blocking, err)
		}
		t.Logf("blocking=%v: %v", blocking, err)
		if msg := err.Error(); strings.Contains(msg, "held by another owner") || !strings.Contains(msg, errFakeCut.Error()) {
			t.Errorf("blocking=%v: Lock's error %q: want the store's error, not 'held by another owner'", blocking, msg)
		}
	}
}
