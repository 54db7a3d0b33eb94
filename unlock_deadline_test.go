package dlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// While an Unlock waits for the store past the lease's deadline, Err says
// the lease may be lost: nothing renews it then, and the lock may be
// another's (an adversary pass saw another client take a PostgreSQL
// row-mode lock while the holder's Err was still nil, its Unlock waiting
// on a renewal cut off by the network). A release that then succeeds,
// which proves the hold was still there, ends the lease as unlocked.
func TestErrDuringLateUnlock(t *testing.T) {
	d := newFake()
	entered, proceed := make(chan struct{}), make(chan struct{})
	d.release = func(context.Context, driver.Held) {
		close(entered)
		<-proceed
	}
	c := New(d, "fake")
	defer c.Close()
	const ttl = 150 * time.Millisecond
	l, err := c.Mutex("late-unlock", WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(context.Background()) }()
	<-entered
	if err := l.Err(); err != nil {
		t.Fatalf("Err right after Unlock began, well before the deadline: %v", err)
	}
	time.Sleep(ttl + 50*time.Millisecond) // past the deadline, and the store's expiry
	if err := l.Err(); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Err while the Unlock waits past the deadline: %v, want ErrLeaseLost", err)
	}
	close(proceed)
	if err := <-unlocked; err != nil && !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Unlock: %v", err)
	}
	if err := l.Err(); err != nil && !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Err after the Unlock: %v", err)
	}
}

// TestExtendFailingDuringUnlock: an Extend whose store call fails while an
// Unlock of the same lease is under way returns the store's error. The
// Unlock detaches the hold, so the loss went unsignalled and the lease's
// Err was nil, and Extend returned that nil: success for an extension the
// store refused (found as a release cut short a SQL connection's check).
func TestExtendFailingDuringUnlock(t *testing.T) {
	errUncertain := errors.New("fake: no answer")
	for _, tc := range []struct {
		name string
		err  error
	}{{"lost", ErrLeaseLost}, {"uncertain", errUncertain}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newFake()
			renewing, unlocking, proceed := make(chan struct{}), make(chan struct{}), make(chan struct{})
			d.renew = func(_ context.Context, batch []driver.Held) []driver.RenewResult {
				close(renewing)
				<-unlocking
				return []driver.RenewResult{{Err: tc.err}}
			}
			d.release = func(context.Context, driver.Held) {
				close(unlocking)
				<-proceed
			}
			c := New(d, "fake")
			defer c.Close()
			l, err := c.Mutex("extend-unlock", WithTTL(10*time.Second), WithoutRenewal()).Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			extended := make(chan error, 1)
			go func() { extended <- l.Extend(t.Context(), 10*time.Second) }()
			<-renewing
			unlocked := make(chan error, 1)
			go func() { unlocked <- l.Unlock(t.Context()) }()
			if err := <-extended; !errors.Is(err, tc.err) {
				t.Errorf("Extend refused by the store during an Unlock: %v, want %v", err, tc.err)
			}
			close(proceed)
			if err := <-unlocked; err != nil {
				t.Errorf("Unlock: %v", err)
			}
		})
	}
}
