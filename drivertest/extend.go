package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// 6b. Extend keeps a fixed lease past its TTL, owner-checked in the store;
// TimeLeft is the client's view, never past the store's expiry.
func (s *suite) testExtend(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	ttl := s.caps.TTL
	start := time.Now()
	l := mustLock(t, a.Mutex(name, dlock.WithTTL(ttl), dlock.WithoutRenewal()))
	left := l.TimeLeft()
	if left <= 0 || left > ttl {
		t.Fatalf("TimeLeft = %v after Lock; want in (0, %v]", left, ttl)
	}
	if err := l.Extend(t.Context(), 0); !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Fatalf("Extend(0) = %v; want ErrInvalidTTL", err)
	}
	time.Sleep(left / 2)
	if err := l.Extend(t.Context(), 2*ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	// Past the original expiry, the lease is live and the store keeps it.
	time.Sleep(time.Until(start.Add(left + s.caps.Slack/2)))
	if l.Err() != nil || l.TimeLeft() <= 0 {
		t.Fatalf("extended lease ended at its original TTL: %v", l.Err())
	}
	wantNotAcquired(t, b, name)
	// It stays fixed at its new length: it ends, and the lock frees.
	waitDone(t, l, 2*ttl+s.caps.Slack+2*time.Second, "extended fixed lease")
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) || l.TimeLeft() != 0 {
		t.Fatalf("after its extended TTL: Err = %v, TimeLeft = %v; want ErrLeaseLost, 0", l.Err(), l.TimeLeft())
	}
	if err := l.Extend(t.Context(), ttl); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Extend of a lost lease = %v; want ErrLeaseLost", err)
	}
	time.Sleep(s.caps.Slack) // the store's own expiry follows the client's
	wantAcquired(t, b, name)
}
