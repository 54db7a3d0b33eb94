package dlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// A grant whose validity, counted from when it was proven, is (nearly) used
// up is released and never returned: Lock waits on for a fresh one, TryLock
// says ErrNotAcquired. This is what a waiter paused while the lock was handed
// to it would otherwise get: a lease another process may already hold.
func TestStaleGrantIsNotReturned(t *testing.T) {
	const ttl = 2 * time.Second
	for _, blocking := range []bool{false, true} {
		for _, try := range []bool{false, true} {
			name := map[bool]string{false: "polling", true: "blocking"}[blocking] + map[bool]string{false: "/Lock", true: "/TryLock"}[try]
			t.Run(name, func(t *testing.T) {
				var mu sync.Mutex
				calls := 0
				d := newFake()
				d.caps.Blocking = blocking
				d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
					mu.Lock()
					defer mu.Unlock()
					calls++
					if calls == 1 { // proven a whole TTL ago, less 5 ms: 5 ms left
						return driver.Grant{Acquired: true, Token: 7, Since: time.Now().Add(-ttl + 5*time.Millisecond)}, nil
					}
					return driver.Grant{Acquired: true, Token: 8}, nil
				}
				c := New(d, "fake")
				defer c.Close()
				m := c.Mutex("stale", WithTTL(ttl))
				var l *Lease
				var err error
				if try {
					l, err = m.TryLock(t.Context())
				} else {
					l, err = m.Lock(t.Context())
				}
				rel := d.releases()
				if len(rel) != 1 || rel[0].Token != 7 {
					t.Errorf("released %+v; want the stale grant (token 7) released", rel)
				}
				if try {
					if !errors.Is(err, ErrNotAcquired) {
						t.Fatalf("TryLock = %v, %v; want ErrNotAcquired", l, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if l.Token() != 8 {
					t.Errorf("Lock returned token %d; want the fresh grant's 8", l.Token())
				}
				if l.Err() != nil {
					t.Errorf("fresh lease already ended: %v", l.Err())
				}
				_ = l.Unlock(t.Context())
			})
		}
	}
}

// A renewal call that never returns (a store client that ignores its
// context) holds up neither its own lease's loss nor another lease's: each
// is declared lost at its deadline, before it could expire in the store.
func TestLossNotDelayedByStuckRenewal(t *testing.T) {
	const ttl = time.Second
	unstick := make(chan struct{})
	d := newFake()
	d.acquire = func(context.Context, driver.Request) (driver.Grant, error) {
		return driver.Grant{Acquired: true, Token: 1}, nil
	}
	d.renew = func(_ context.Context, batch []driver.Held) []driver.RenewResult {
		<-unstick // ignores ctx
		return make([]driver.RenewResult, len(batch))
	}
	c := New(d, "fake")
	defer c.Close()
	defer close(unstick) // before Close, which waits for renewals in flight

	beforeA := time.Now()
	a, err := c.Mutex("a", WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl / 2) // a's first renewal (at ttl/3) is now stuck
	beforeB := time.Now()
	b, err := c.Mutex("b", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		l      *Lease
		expiry time.Time
	}{{a, beforeA.Add(ttl)}, {b, beforeB.Add(ttl)}} {
		select {
		case <-x.l.Done():
		case <-time.After(time.Until(x.expiry) + ttl):
			t.Fatalf("%s: not declared lost a TTL after it could have expired (a renewal is stuck)", x.l.Name())
		}
		// The promise is "before expiry"; allow scheduling delay on a loaded machine.
		if late := time.Since(x.expiry); late > 100*time.Millisecond {
			t.Errorf("%s: declared lost %v after it could have expired", x.l.Name(), late)
		} else {
			t.Logf("%s: declared lost %v before expiry", x.l.Name(), -late)
		}
		if !errors.Is(x.l.Err(), ErrLeaseLost) {
			t.Errorf("%s: Err = %v; want ErrLeaseLost", x.l.Name(), x.l.Err())
		}
	}
}

// Err and Done look at the deadline themselves: once it has passed, the
// lease reads as lost even if the scheduler has not run yet (as after a
// pause of the whole process).
func TestErrConsultsDeadline(t *testing.T) {
	d := newFake()
	d.acquire = func(context.Context, driver.Request) (driver.Grant, error) {
		return driver.Grant{Acquired: true, Token: 1}, nil
	}
	c := New(d, "fake")
	defer c.Close()
	for _, call := range []string{"Err", "Done"} {
		l, err := c.Mutex("deadline/"+call, WithTTL(time.Hour)).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// as if the process had slept past the deadline
		c.e.Sched().SetDeadline(l.hold().Entry(), time.Now().Add(-time.Millisecond))
		switch call {
		case "Err":
			if !errors.Is(l.Err(), ErrLeaseLost) {
				t.Errorf("Err = %v past the deadline; want ErrLeaseLost", l.Err())
			}
		case "Done":
			select {
			case <-l.Done():
			default:
				t.Errorf("Done open past the deadline")
			}
			if !errors.Is(l.Err(), ErrLeaseLost) {
				t.Errorf("Err = %v after Done; want ErrLeaseLost", l.Err())
			}
		}
	}
}

// A re-entry that the store grants under another token finds a later hold
// of the owner, not ours: ours is lost, and the re-entry becomes a new hold
// instead of sharing a dead lease's token.
func TestReentryOnAnotherTokenIsNotOurs(t *testing.T) {
	d := newFake()
	d.caps.Reentrant = true
	calls := 0
	d.acquire = func(context.Context, driver.Request) (driver.Grant, error) {
		calls++
		if calls == 1 {
			return driver.Grant{Acquired: true, Token: 1, Holds: 1}, nil
		}
		return driver.Grant{Acquired: true, Token: 2, Holds: calls - 1}, nil
	}
	c := New(d, "fake")
	defer c.Close()
	m := c.Mutex("reenter", WithOwner("o"))
	l1, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	l2, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l1.Err(), ErrLeaseLost) {
		t.Errorf("first lease Err = %v; want ErrLeaseLost (the store's hold is a later one)", l1.Err())
	}
	if l2.Token() != 2 || l2.Err() != nil {
		t.Errorf("re-entry lease token %d, Err %v; want a live lease with the store's token 2", l2.Token(), l2.Err())
	}
	var sawRelease bool
	for _, h := range d.releases() {
		sawRelease = sawRelease || h.Token == 2
	}
	if !sawRelease {
		t.Errorf("the count the re-entry added to token 2 was not released: %+v", d.releases())
	}
}

// A Grant.Since in the future (a driver's bug) does not stretch the lease:
// it counts from no later than when the grant came back.
func TestFutureSinceIsClamped(t *testing.T) {
	const ttl = time.Second
	d := newFake()
	d.acquire = func(context.Context, driver.Request) (driver.Grant, error) {
		return driver.Grant{Acquired: true, Token: 1, Since: time.Now().Add(time.Hour)}, nil
	}
	c := New(d, "fake")
	defer c.Close()
	before := time.Now()
	l, err := c.Mutex("future", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if left, most := l.TimeLeft(), ttl-time.Since(before)+time.Millisecond; left > most {
		t.Fatalf("TimeLeft = %v with a Since an hour ahead; want at most %v", left, most)
	}
}

// A grant whose session has already ended (Grant.Lost closed) is not
// returned: the store has dropped, or will drop, what it granted.
func TestGrantInEndedSessionIsNotReturned(t *testing.T) {
	ended := make(chan struct{})
	close(ended)
	d := newFake()
	calls := 0
	d.acquire = func(context.Context, driver.Request) (driver.Grant, error) {
		calls++
		if calls == 1 {
			return driver.Grant{Acquired: true, Token: 1, Lost: ended}, nil
		}
		return driver.Grant{Acquired: true, Token: 2}, nil
	}
	c := New(d, "fake")
	defer c.Close()
	l, err := c.Mutex("session").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != 2 || l.Err() != nil {
		t.Fatalf("Lock returned token %d (Err %v); want the grant of a live session, token 2", l.Token(), l.Err())
	}
	if rel := d.releases(); len(rel) != 1 || rel[0].Token != 1 {
		t.Errorf("released %+v; want the ended session's grant (token 1)", rel)
	}
}
