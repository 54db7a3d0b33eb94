package dlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// A LockAll that fails releases what it took within a bound of its own: its
// ctx has ended, and a store whose release never answers (an SQL store in
// table mode cut off mid-handshake) kept LockAll from returning until the
// link came back (an adversary pass).
func TestLockAllReleaseIsBounded(t *testing.T) {
	silent := newFake()
	silent.release = func(ctx context.Context, _ driver.Held) { <-ctx.Done() } // no answer until ctx ends
	a := New(silent, "fake", quiet())
	defer a.Close()
	store := newFake()
	b, other := New(store, "other", quiet()), New(store, "other", quiet())
	defer b.Close()
	defer other.Close()
	held, err := other.Mutex("b").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(t.Context())
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		g, err := LockAll(ctx, a.Mutex("a"), b.Mutex("b"))
		if err == nil {
			_ = g.Unlock(t.Context())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotAcquired) {
			t.Errorf("LockAll = %v; want ErrNotAcquired", err)
		}
	case <-time.After(releaseBound + 10*time.Second): // generous: a loaded machine
		t.Fatal("LockAll did not return: its release of a silent store is unbounded")
	}
}

// A write (or read) request whose first attempt failed because its ctx
// ended tells the store it gives up its wait: the attempt may have left a
// record of the waiting request, and pglock's table mode then refused a
// free lock to others for the record's life (2 s; an adversary pass).
func TestFirstAttemptCutForgetsWait(t *testing.T) {
	d := kindsFake()
	var mu sync.Mutex
	waiting := map[string]bool{} // owners with a wait record
	d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
		g, err := storeAcquire(d, req)
		if err == nil && !g.Acquired && !req.Try {
			mu.Lock()
			waiting[req.Owner] = true // recorded, and the answer is lost as ctx ends
			mu.Unlock()
			<-ctx.Done()
			return driver.Grant{}, ctx.Err()
		}
		return g, err
	}
	d.release = func(_ context.Context, h driver.Held) {
		if h.Token == 0 {
			mu.Lock()
			delete(waiting, h.Owner)
			mu.Unlock()
		}
	}
	c := New(d, "fake", quiet())
	defer c.Close()
	w, err := c.RWMutex("x").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.RWMutex("x").Lock(ctx); err == nil {
		t.Fatal("a second writer was granted")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waiting) != 0 {
		t.Errorf("the given-up wait is still recorded in the store: %v", waiting)
	}
}

// silentKinds is the fake with every kind, whose kind inspection and
// releases get no answer until their ctx ends: a store cut off.
type silentKinds struct{ *fakeDriver }

func (s silentKinds) InspectKind(ctx context.Context, _ string, _ driver.Kind) (driver.Info, error) {
	<-ctx.Done()
	return driver.Info{}, ctx.Err()
}

// A write request cut by its ctx on a silent store returns within one
// clean-up bound (2 s) of its ctx: the undo of the attempt that may have
// taken the lock and the forgetting of its wait record ran one after the
// other, 2 s each (the re-test adversary pass: RWMutex.Lock 4.3 s late on
// MariaDB, against Mutex.Lock's 2.3).
func TestCutWriteCleansUpWithinOneBound(t *testing.T) {
	d := kindsFake()
	d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
		if req.Try {
			return storeAcquire(d, req)
		}
		<-ctx.Done() // no answer
		return driver.Grant{}, ctx.Err()
	}
	d.release = func(ctx context.Context, _ driver.Held) { <-ctx.Done() }
	c := New(silentKinds{d}, "fake", quiet())
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.RWMutex("x").Lock(ctx); err == nil {
		t.Fatal("granted by a silent store")
	}
	// One bound is 2 s; two were 4. Room for a loaded machine between.
	if took := time.Since(start); took > 3500*time.Millisecond {
		t.Errorf("Lock cut at 100 ms returned after %v", took.Round(time.Millisecond))
	}
}
