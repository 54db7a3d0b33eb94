package dlock

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"go.uber.org/goleak"
)

// blockingFake is the fake store with blocking waits (Caps.Blocking): a
// waiting Acquire stays in the store until the lock is free or its ctx
// ends, as etcd's and ZooKeeper's do. inStore counts the Acquires waiting
// there now.
type blockingFake struct {
	*fakeDriver
	inStore atomic.Int64
}

func (d *blockingFake) Caps() driver.Caps {
	c := d.fakeDriver.Caps()
	c.Blocking = true
	return c
}

func (d *blockingFake) Acquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if !req.Wait {
		return d.fakeDriver.Acquire(ctx, req)
	}
	d.inStore.Add(1)
	defer d.inStore.Add(-1)
	for {
		g, err := d.fakeDriver.Acquire(ctx, req)
		if err != nil || g.Acquired {
			return g, err
		}
		select {
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// heldBy reports the owner of name's lock in the fake store ("" if free).
func heldBy(d *fakeDriver, name string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.locks[name]
	if !ok || !time.Now().Before(l.expires) {
		return ""
	}
	return l.owner
}

// sameOwnerWaiters has another client hold name, then starts two Locks of
// one owner on c: the first waits in the store, the second (started once
// the first is there) waits for the owner's turn behind it. It returns
// their results.
func sameOwnerWaiters(t *testing.T, d *blockingFake, c *Client, name string, ctx2 context.Context) (first, second <-chan error) {
	t.Helper()
	m := c.Mutex(name, WithOwner("worker"), WithTTL(time.Minute))
	r1, r2 := make(chan error, 1), make(chan error, 1)
	go func() {
		l, err := m.Lock(t.Context())
		if err == nil {
			err = l.Unlock(t.Context())
		}
		r1 <- err
	}()
	for d.inStore.Load() == 0 {
		runtime.Gosched()
	}
	go func() {
		l, err := m.Lock(ctx2)
		if err == nil {
			err = l.Unlock(t.Context())
		}
		r2 <- err
	}()
	for range 100 { // let the second reach the owner's turn (it is right either way)
		runtime.Gosched()
	}
	return r1, r2
}

// Close while two acquisitions of one owner and name are under way, one
// blocked in the store and one waiting for the owner's turn behind it:
// both end with ErrClosed (not a context error), the store keeps no hold
// of the owner, the client no state and no goroutine.
func TestCloseEndsSameOwnerTurnWait(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for i := range 20 {
		d := &blockingFake{fakeDriver: newFake()}
		other := New(d.fakeDriver, "fake", quiet())
		held, err := other.Mutex("turn/close", WithTTL(time.Minute)).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c := New(d, "fake", quiet())
		r1, r2 := sameOwnerWaiters(t, d, c, "turn/close", t.Context())
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for j, r := range []<-chan error{r1, r2} {
			if err := <-r; !errors.Is(err, ErrClosed) || errors.Is(err, context.Canceled) {
				t.Fatalf("round %d: Lock %d after Close = %v; want ErrClosed alone", i, j+1, err)
			}
		}
		if n, w, holds, freeing := c.e.Leftovers(); n+w+holds+freeing != 0 {
			t.Fatalf("round %d: left behind: %d owner turns, %d wait lines, %d holds, %d releases", i, n, w, holds, freeing)
		}
		if err := held.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		if o := heldBy(d.fakeDriver, "turn/close"); o != "" {
			t.Fatalf("round %d: the store still has a hold of %q after Close", i, o)
		}
		_ = other.Close()
	}
}

// The second acquisition's ctx ends while it waits for the owner's turn:
// it returns ctx's error, and the first, blocked in the store, goes on to
// get the lock once it is free.
func TestCancelledSameOwnerTurnWaitLeavesFirst(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := &blockingFake{fakeDriver: newFake()}
	other := New(d.fakeDriver, "fake", quiet())
	defer other.Close()
	held, err := other.Mutex("turn/cancel", WithTTL(time.Minute)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c := New(d, "fake", quiet())
	defer c.Close()
	ctx2, cancel := context.WithCancel(t.Context())
	r1, r2 := sameOwnerWaiters(t, d, c, "turn/cancel", ctx2)
	cancel()
	if err := <-r2; !errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
		t.Fatalf("cancelled Lock = %v; want context.Canceled", err)
	}
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := <-r1; err != nil {
		t.Fatalf("first Lock, after the second gave up: %v", err)
	}
	if n, w, holds, freeing := c.e.Leftovers(); n+w+holds+freeing != 0 {
		t.Fatalf("left behind: %d owner turns, %d wait lines, %d holds, %d releases", n, w, holds, freeing)
	}
	if o := heldBy(d.fakeDriver, "turn/cancel"); o != "" {
		t.Fatalf("the store still has a hold of %q", o)
	}
}

// A TryLock of the owner while its other acquisition is blocked in the
// store gives up at once with ErrNotAcquired, and Close then still ends
// the blocked one with ErrClosed.
func TestTryLockBehindBlockedSameOwner(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := &blockingFake{fakeDriver: newFake()}
	other := New(d.fakeDriver, "fake", quiet())
	defer other.Close()
	held, err := other.Mutex("turn/try", WithTTL(time.Minute)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(t.Context())
	c := New(d, "fake", quiet())
	m := c.Mutex("turn/try", WithOwner("worker"), WithTTL(time.Minute))
	r1 := make(chan error, 1)
	go func() {
		_, err := m.Lock(t.Context())
		r1 <- err
	}()
	for d.inStore.Load() == 0 {
		runtime.Gosched()
	}
	if l, err := m.TryLock(t.Context()); !errors.Is(err, ErrNotAcquired) {
		if l != nil {
			_ = l.Unlock(t.Context())
		}
		t.Fatalf("TryLock behind the owner's blocked Lock = %v; want ErrNotAcquired", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-r1; !errors.Is(err, ErrClosed) {
		t.Fatalf("blocked Lock after Close = %v; want ErrClosed", err)
	}
}

// Close while a Lock of the owner waits for the release under way of the
// owner's last hold (Releases.Await): the Lock ends with ErrClosed, and
// once the release lands the store keeps nothing of the owner.
func TestCloseDuringSameOwnerReleaseWait(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	d := newFake()
	g := &releaseGate{fakeDriver: d, entered: make(chan struct{}), open: make(chan struct{})}
	c := New(g, "fake", quiet())
	m := c.Mutex("owner/close", WithOwner("worker-1"), WithTTL(time.Minute))
	l1, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l1.Unlock(t.Context()) }()
	<-g.entered
	got := make(chan error, 1)
	go func() {
		l2, err := m.Lock(t.Context())
		if err == nil {
			err = l2.Unlock(t.Context())
		}
		got <- err
	}()
	for range 100 {
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	var err2 error
	select {
	case err2 = <-got:
	case <-time.After(time.Second): // a Lock let through before the release lands: it must wait
	}
	close(g.open)
	if err := <-unlocked; err != nil {
		t.Fatal(err)
	}
	if err2 == nil {
		err2 = <-got
	}
	if !errors.Is(err2, ErrClosed) {
		t.Fatalf("Lock waiting for the owner's release, after Close = %v; want ErrClosed", err2)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if o := heldBy(d, "owner/close"); o != "" {
		t.Fatalf("the store still has a hold of %q after Close and Unlock", o)
	}
}

// Close racing a grant: three acquisitions of one owner and name (one in
// the store, two on the owner's turn) while the other holder lets go and
// the client closes, at varying points. Each Lock ends with a lease or
// ErrClosed; a lease it got is ended by Close; the store keeps no hold of
// the owner and the client no state, whatever the order.
func TestCloseRacingSameOwnerGrant(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for i := range 40 {
		d := &blockingFake{fakeDriver: newFake()}
		other := New(d.fakeDriver, "fake", quiet())
		held, err := other.Mutex("turn/race", WithTTL(time.Minute)).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c := New(d, "fake", quiet())
		m := c.Mutex("turn/race", WithOwner("worker"), WithTTL(time.Minute))
		type result struct {
			l   *Lease
			err error
		}
		results := make(chan result, 3)
		for range 3 {
			go func() {
				l, err := m.Lock(t.Context())
				results <- result{l, err}
			}()
		}
		for d.inStore.Load() == 0 {
			runtime.Gosched()
		}
		go func() { _ = held.Unlock(t.Context()) }()
		for range i % 8 * 10 {
			runtime.Gosched()
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			r := <-results
			switch {
			case r.err == nil:
				if err := r.l.Err(); !errors.Is(err, ErrClosed) {
					t.Fatalf("round %d: a lease got before Close has Err %v after it; want ErrClosed", i, err)
				}
			case !errors.Is(r.err, ErrClosed):
				t.Fatalf("round %d: Lock = %v; want a lease or ErrClosed", i, r.err)
			}
		}
		if n, w, holds, freeing := c.e.Leftovers(); n+w+holds+freeing != 0 {
			t.Fatalf("round %d: left behind: %d owner turns, %d wait lines, %d holds, %d releases", i, n, w, holds, freeing)
		}
		if o := heldBy(d.fakeDriver, "turn/race"); o == "worker" {
			t.Fatalf("round %d: the store still has the owner's hold after Close", i)
		}
		_ = other.Close()
	}
}
