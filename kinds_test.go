package dlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// kindsFake is the fake store with every kind enabled; it holds each kind
// as an exclusive lock, which is all the root logic below needs.
func kindsFake() *fakeDriver {
	d := newFake()
	d.caps.Kinds = []driver.Kind{driver.Shared, driver.Write, driver.Permit}
	return d
}

// A backend without the kinds refuses RWMutex and Semaphore with
// ErrUnsupported and its reason, from every method, without a store call.
func TestKindsUnsupported(t *testing.T) {
	d := newFake()
	d.caps.KindsNote = "the fake cannot"
	c := New(d, "fake", quiet())
	defer c.Close()
	ctx := t.Context()
	rw, sem := c.RWMutex("x"), c.Semaphore("x", 2)
	calls := []func() error{
		func() error { _, err := rw.RLock(ctx); return err },
		func() error { _, err := rw.TryRLock(ctx); return err },
		func() error { _, err := rw.Lock(ctx); return err },
		func() error { _, err := rw.TryLock(ctx); return err },
		func() error { _, err := sem.Acquire(ctx); return err },
		func() error { _, err := sem.TryAcquire(ctx); return err },
		func() error { _, err := rw.Inspect(ctx); return err },
		func() error { _, err := sem.Inspect(ctx); return err },
	}
	for i, call := range calls {
		err := call()
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "the fake cannot") {
			t.Errorf("call %d: %v; want ErrUnsupported with the reason", i, err)
		}
	}
	if n := d.acquires.Load(); n != 0 {
		t.Fatalf("%d store calls for an unsupported kind", n)
	}
	if _, err := c.Mutex("x").TryLock(ctx); err != nil {
		t.Fatalf("Mutex on the same backend: %v", err)
	}
}

func TestSemaphoreBadCount(t *testing.T) {
	c := New(kindsFake(), "fake", quiet())
	defer c.Close()
	for _, n := range []int{0, -1} {
		if _, err := c.Semaphore("x", n).TryAcquire(t.Context()); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Semaphore(x, %d): %v; want ErrInvalidConfig", n, err)
		}
	}
}

// A read under the owner's write hold is a lease on the write hold (here a
// store that keeps no counts: no store call); a write under a read hold is
// refused with ErrUpgrade, also for a shared owner id.
func TestRWReentryRules(t *testing.T) {
	d := kindsFake()
	c := New(d, "fake", quiet())
	defer c.Close()
	rw := c.RWMutex("x")
	err := Do(t.Context(), rw, func(ctx context.Context, w *Lease) error {
		before := d.acquires.Load()
		r, err := rw.RLock(ctx)
		if err != nil {
			return err
		}
		if r.Token() != w.Token() || r.hold() != w.hold() || d.acquires.Load() != before {
			t.Errorf("read under write: token %d (write %d), same hold %v, %d store calls",
				r.Token(), w.Token(), r.hold() == w.hold(), d.acquires.Load()-before)
		}
		return r.Unlock(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range d.releases() {
		if h.Kind != driver.Write {
			t.Fatalf("released %+v; want only the write hold", h)
		}
	}
	err = Do(t.Context(), rw.RLocker(), func(ctx context.Context, r *Lease) error {
		before := d.acquires.Load()
		if _, err := rw.Lock(ctx); !errors.Is(err, ErrUpgrade) {
			t.Errorf("write under read: %v; want ErrUpgrade", err)
		}
		if _, err := rw.TryLock(ctx); !errors.Is(err, ErrUpgrade) {
			t.Errorf("trywrite under read: %v; want ErrUpgrade", err)
		}
		if d.acquires.Load() != before {
			t.Errorf("an upgrade attempt reached the store")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	owned := c.RWMutex("y", WithOwner("me"))
	r, err := owned.RLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owned.TryLock(t.Context()); !errors.Is(err, ErrUpgrade) {
		t.Fatalf("owner's write under its read: %v; want ErrUpgrade", err)
	}
	if err := r.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := owned.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err = owned.TryRLock(t.Context())
	if err != nil || r.Token() != w.Token() {
		t.Fatalf("owner's read under its write: %v, token %v; want the write hold's %d", err, r, w.Token())
	}
	_ = r.Unlock(t.Context())
	_ = w.Unlock(t.Context())
}

// A Mutex, an RWMutex and a Semaphore of one name and owner are three
// holds: none re-enters another, and a ctx lease of one family is no lease
// of another.
func TestFamiliesApartInClient(t *testing.T) {
	d := kindsFake()
	c := New(d, "fake", quiet())
	defer c.Close()
	ctx := t.Context()
	m, err := c.Mutex("x", WithOwner("o")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.RWMutex("x", WithOwner("o")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Semaphore("x", 1, WithOwner("o")).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.hold() == w.hold() || w.hold() == p.hold() || m.hold() == p.hold() {
		t.Fatal("holds of different families share a hold")
	}
	lctx := ContextWithLease(ctx, m)
	if l := core.LeaseIn(lctx, c.e, "x", driver.Write); l != nil {
		t.Fatal("a Mutex lease counted as an RWMutex lease")
	}
	for _, l := range []*Lease{p, w, m} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(d.releases()); n != 3 {
		t.Fatalf("%d store releases; want 3", n)
	}
}

// A waiter for an RWMutex is not queued behind the same client's waiter
// for the Mutex of the same name.
func TestWaitQueuesPerFamily(t *testing.T) {
	d := kindsFake()
	a, b := New(d, "fake", quiet()), New(d, "fake", quiet())
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	mh, err := a.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mh.Unlock(ctx)
	wh, err := a.RWMutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = b.Mutex("x").Lock(mctx) }() // waits as long as the test
	for !b.queued("x") {
		time.Sleep(time.Millisecond)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := b.RWMutex("x", WithTTL(time.Minute)).Lock(wctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // the write waiter is waiting
	if err := wh.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("RWMutex waiter behind a Mutex waiter: %v", err)
	}
}

// queued reports whether a waiter of name's Mutex is in c's local queue.
func (c *Client) queued(name string) bool {
	return c.e.Queued(name)
}

// Err reports, at construction, what every method of a lock would refuse
// with: an unsupported kind names the reason; a usable lock says nil.
func TestErrAtConstruction(t *testing.T) {
	d := newFake()
	d.caps.Kinds = nil
	d.caps.KindsNote = "the fake keeps only mutexes"
	c := New(d, "fake", quiet())
	defer c.Close()
	if err := c.Mutex("ok").Err(); err != nil {
		t.Fatalf("Mutex.Err = %v; want nil", err)
	}
	if err := c.Mutex("").Err(); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Mutex(\"\").Err = %v; want ErrInvalidName", err)
	}
	for what, err := range map[string]error{"RWMutex": c.RWMutex("x").Err(), "Semaphore": c.Semaphore("x", 2).Err()} {
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "only mutexes") {
			t.Fatalf("%s.Err = %v; want ErrUnsupported with the backend's reason", what, err)
		}
	}
	if err := c.Semaphore("x", 0).Err(); err == nil {
		t.Fatal("Semaphore with 0 permits: Err = nil")
	}
	if err := c.Election("x").Err(); err != nil {
		t.Fatalf("Election.Err = %v; want nil (portable on a mutex)", err)
	}
}
