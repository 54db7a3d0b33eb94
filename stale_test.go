package dlock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// The worst case of the acquire loop: a free lock whose every grant comes too
// late to be safe (a TTL longer than the store keeps a hold, or shorter than
// a round trip). Lock must pace its attempts as a poll does, not loop as
// fast as the store answers, release every grant, and end with an error
// that says the grants were too late, not that another owner held the lock.
func TestStaleGrantsArePaced(t *testing.T) {
	const ttl = 2 * time.Second
	const wait = 600 * time.Millisecond
	// pollMin doubling, each pause at least half its step: 2.5+5+…+320 ms
	// passes 600 ms after 9 pauses, so no more than 10 attempts fit.
	const most = 10
	for _, blocking := range []bool{false, true} {
		t.Run(map[bool]string{false: "polling", true: "blocking"}[blocking], func(t *testing.T) {
			var tok atomic.Uint64
			d := newFake()
			d.caps.Blocking = blocking
			d.acquire = func(ctx context.Context, req driver.Request) (driver.Grant, error) {
				// Granted at once, but valid for 1 ms only (as a ZooKeeper
				// session shorter than the TTL): always too late.
				return driver.Grant{Acquired: true, Token: tok.Add(1), Validity: time.Millisecond}, nil
			}
			c := New(d, "fake")
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			l, err := c.Mutex("stale-paced", WithTTL(ttl)).Lock(ctx)
			if err == nil {
				_ = l.Unlock(t.Context())
				t.Fatal("Lock returned a lease from grants that were all too late")
			}
			n := d.acquires.Load()
			t.Logf("%d store calls in %v; error: %v", n, wait, err)
			if n > most {
				t.Errorf("%d acquire calls in %v; the wait strategy allows at most %d", n, wait, most)
			}
			if n < 2 {
				t.Errorf("%d acquire calls: a too-late grant was not retried", n)
			}
			if rel := len(d.releases()); int64(rel) != n {
				t.Errorf("%d of %d too-late grants released", rel, n)
			}
			if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v; want ErrNotAcquired and the deadline", err)
			}
			if msg := err.Error(); strings.Contains(msg, "another owner") || !strings.Contains(msg, "too late") {
				t.Errorf("error %q; want it to say the grants came too late, not that another owner held the lock", msg)
			}
		})
	}
}

// A TTL so short that no grant of it could be returned (each must arrive
// with TTL/100 + 2ms + TTL/10 left) is refused when the lock is made, not
// tried forever.
func TestTTLTooShortToGrantRefused(t *testing.T) {
	c := New(newFake(), "fake")
	defer c.Close()
	for _, ttl := range []time.Duration{time.Millisecond, 5 * time.Millisecond} {
		if err := c.Mutex("short", WithTTL(ttl)).Err(); !errors.Is(err, ErrInvalidTTL) || !strings.Contains(err.Error(), "too short to be granted") {
			t.Errorf("TTL %v: Err = %v; want ErrInvalidTTL saying it is too short to be granted", ttl, err)
		}
	}
	l, err := c.Mutex("short", WithTTL(6*time.Millisecond), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatalf("TTL 6ms: %v", err)
	}
	_ = l.Unlock(t.Context())
}
