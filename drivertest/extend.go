package drivertest

import (
	"context"
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
	// A waiter comes now: whatever it writes to wait (a flag in the
	// holder's key, a queue entry) must not shorten the extended lease. On
	// NATS a waiter's flag kept the key's life from the grant's TTL, and
	// the waiter got the lock while the extended lease ran.
	type grant struct {
		l       *dlock.Lease
		err     error
		overlap bool
	}
	granted := make(chan grant, 1)
	wctx, cancel := context.WithTimeout(t.Context(), 2*ttl+s.caps.Slack+10*time.Second)
	defer cancel()
	go func() {
		lb, err := b.Mutex(name, dlock.WithTTL(ttl)).Lock(wctx)
		granted <- grant{lb, err, err == nil && l.Err() == nil && l.TimeLeft() > 0}
	}()
	// Past the original expiry, the lease is live and the store keeps it.
	time.Sleep(time.Until(start.Add(left + s.caps.Slack/2)))
	if l.Err() != nil || l.TimeLeft() <= 0 {
		t.Fatalf("extended lease ended at its original TTL: %v", l.Err())
	}
	wantNotAcquired(t, s.client(t), name)
	// It stays fixed at its new length: it ends, and the lock goes to the
	// waiter.
	waitDone(t, l, 2*ttl+s.caps.Slack+2*time.Second, "extended fixed lease")
	if !errors.Is(l.Err(), dlock.ErrLeaseLost) || l.TimeLeft() != 0 {
		t.Fatalf("after its extended TTL: Err = %v, TimeLeft = %v; want ErrLeaseLost, 0", l.Err(), l.TimeLeft())
	}
	if err := l.Extend(t.Context(), ttl); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Extend of a lost lease = %v; want ErrLeaseLost", err)
	}
	g := <-granted
	switch {
	case g.err != nil:
		t.Fatalf("waiter after the extended lease ended: %v", g.err)
	case g.overlap:
		t.Fatalf("waiter granted (token %d) while the extended lease was live: two holders", g.l.Token())
	}
	if err := g.l.Unlock(t.Context()); err != nil {
		t.Fatalf("waiter's Unlock: %v", err)
	}
}
