package memlock_test

import (
	"context"
	"errors"
	"sync"
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

// lossy is a memlock driver whose chosen Acquire calls are applied in the
// store but answer with an error, as when the reply is lost or ctx cuts
// the round trip after the store applied it.
type lossy struct {
	*memlock.Driver
	lose func(n int) bool // whether the n-th Acquire (from 1) loses its reply
	n    int
	mu   sync.Mutex
}

func (d *lossy) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	d.mu.Lock()
	d.n++
	lose := d.lose(d.n)
	d.mu.Unlock()
	g, err := d.Driver.Acquire(ctx, req)
	if err == nil && lose {
		return driver.Grant{}, errors.New("lossy: reply lost")
	}
	return g, err
}

// A TryLock or Lock whose attempt took the lock but lost its reply returns
// an error and leaves the lock free, and a Lock that got the lock on a
// later attempt frees it with its Unlock: nobody else has the call's owner,
// so whatever the store holds for it is the call's.
func TestLostReplyTakesNothing(t *testing.T) {
	store := "mem://" + t.Name()
	open := func(lose func(int) bool) *dlock.Client {
		raw, err := dlock.Open(t.Context(), store)
		if err != nil {
			t.Fatal(err)
		}
		var d *memlock.Driver
		raw.As(&d)
		c := dlock.New(&lossy{Driver: d, lose: lose}, memlock.Scheme)
		t.Cleanup(func() { _ = c.Close(); _ = raw.Close() })
		return c
	}
	other := open(func(int) bool { return false })
	free := func(what, name string, kind driver.Kind) {
		t.Helper()
		var l *dlock.Lease
		var err error
		if kind == driver.Permit {
			l, err = other.Semaphore(name, 1).TryAcquire(t.Context())
		} else {
			l, err = other.Mutex(name).TryLock(t.Context())
		}
		if err != nil {
			t.Fatalf("%s: the lock is not free afterwards: %v", what, err)
		}
		_ = l.Unlock(t.Context())
	}

	c := open(func(n int) bool { return n == 1 })
	if l, err := c.Mutex("lost/try").TryLock(t.Context()); err == nil {
		_ = l.Unlock(t.Context())
		t.Fatal("TryLock whose reply was lost succeeded")
	}
	free("TryLock with a lost reply", "lost/try", driver.Exclusive)

	c = open(func(n int) bool { return n == 1 })
	if l, err := c.Semaphore("lost/permit", 1).TryAcquire(t.Context()); err == nil {
		_ = l.Unlock(t.Context())
		t.Fatal("TryAcquire whose reply was lost succeeded")
	}
	free("TryAcquire with a lost reply", "lost/permit", driver.Permit)

	c = open(func(n int) bool { return n == 1 }) // the retry re-enters the hold the lost attempt took
	l, err := c.Mutex("lost/retried").Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock retried after a lost reply: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	free("Lock that got the lock after a lost reply, unlocked", "lost/retried", driver.Exclusive)

	ctx, cancel := context.WithCancel(t.Context())
	c = open(func(n int) bool { cancel(); return true }) // ctx ends with the lost reply
	if l, err := c.Mutex("lost/cancelled").Lock(ctx); err == nil {
		_ = l.Unlock(t.Context())
		t.Fatal("Lock whose ctx ended with a lost reply succeeded")
	}
	free("Lock whose ctx ended with a lost reply", "lost/cancelled", driver.Exclusive)
}

// A re-entry (through a ctx carrying the lease) whose count was added in
// the store but whose reply was lost returns an error; the count it added
// must not outlive the hold: once the holder unlocks, the lock is free.
func TestLostReentryReplyTakesNothing(t *testing.T) {
	store := "mem://" + t.Name()
	raw, err := dlock.Open(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var d *memlock.Driver
	raw.As(&d)
	c := dlock.New(&lossy{Driver: d, lose: func(n int) bool { return n == 2 }}, memlock.Scheme)
	defer c.Close()
	m := c.Mutex("lost/reentry")
	l, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if inner, err := m.Lock(dlock.ContextWithLease(t.Context(), l)); err == nil {
		_ = inner.Unlock(t.Context())
		t.Fatal("re-entry whose reply was lost succeeded")
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l, err := raw.Mutex("lost/reentry").TryLock(t.Context()); err != nil {
		t.Fatalf("after the holder unlocked, the lock is still held: %v", err)
	} else {
		_ = l.Unlock(t.Context())
	}
}
