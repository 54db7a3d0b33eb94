package memlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/memlock"
)

// An attempt whose ctx has ended by the time it reaches the store takes
// nothing: Acquire returned ctx's error, so dlock drops the grant, and a
// hold taken anyway would block the name until its TTL with nobody to
// release it (a waiter woken by a release just as its ctx was cancelled).
func TestAcquireWithEndedContextTakesNothing(t *testing.T) {
	c := memlock.Open()
	defer c.Close()
	var d *memlock.Driver
	if !c.As(&d) {
		t.Fatal("not a memlock client")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, k := range []driver.Kind{driver.Exclusive, driver.Shared, driver.Write, driver.Permit} {
		req := driver.Request{Name: "ended/" + k.String(), Owner: "gone", TTL: time.Minute, Kind: k, Limit: 1}
		if g, err := d.Acquire(ctx, req); err == nil {
			t.Fatalf("%v: Acquire with an ended ctx = %+v, nil; want ctx's error", k, g)
		}
		var l *dlock.Lease
		var err error
		switch k {
		case driver.Exclusive:
			l, err = c.Mutex(req.Name).TryLock(t.Context())
		case driver.Permit:
			l, err = c.Semaphore(req.Name, 1).TryAcquire(t.Context())
		default:
			l, err = c.RWMutex(req.Name).TryLock(t.Context())
		}
		if err != nil {
			t.Fatalf("%v: after an Acquire that failed with ctx's error, the lock is held: %v", k, err)
		}
		_ = l.Unlock(t.Context())
	}
}
