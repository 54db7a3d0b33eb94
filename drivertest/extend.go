package drivertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// extendRounds is how many rounds the Extend case tries before it gives up
// on a machine too slow to check it (see extendRound).
const extendRounds = 5

// 6b. Extend keeps a fixed lease past its TTL, owner-checked in the store;
// TimeLeft is the client's view, never past the store's expiry.
func (s *suite) testExtend(t *testing.T) {
	a, b, probe := s.client(t), s.client(t), s.client(t)
	for i := range extendRounds {
		void := s.extendRound(t, a, b, probe)
		if void == "" {
			return
		}
		t.Logf("round %d proves nothing, tried again: %s", i+1, void)
	}
	t.Fatalf("Extend: none of %d rounds ran on time (a machine too slow to check it)", extendRounds)
}

// extendRound is one round of the Extend case, on a new name. It fails the
// test on what the store or the client got wrong, and returns why the round
// proves nothing when the machine's own lateness broke its premise (a
// sleep or a request late by more than the lease's TTL): every check whose
// timing load can break is made so that a lease the client still believes
// live is the proof, which no lateness can fake.
func (s *suite) extendRound(t *testing.T, a, b, probe *dlock.Client) (void string) {
	name := lockName(t)
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
	// The client's deadline is never past the store's expiry, so an Extend
	// that returns before it reached the store in time: the store must
	// take it.
	before := deadline(l)
	if err := l.Extend(t.Context(), 2*ttl); err != nil {
		if errors.Is(err, dlock.ErrLeaseLost) && !time.Now().Before(before) {
			return fmt.Sprintf("Extend returned %v after the lease's deadline", err)
		}
		t.Fatalf("Extend: %v", err)
	}
	extended := deadline(l)
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
	// collect ends the waiter of a round that proves nothing, and still
	// fails the test if it was granted while the lease was live.
	collect := func(why string) string {
		cancel()
		g := <-granted
		if g.overlap {
			t.Fatalf("waiter granted (token %d) while the extended lease was live: two holders", g.l.Token())
		}
		if g.err == nil {
			_ = g.l.Unlock(t.Context())
		}
		return why
	}
	// Past the original expiry, the lease is live and the store keeps it.
	time.Sleep(time.Until(start.Add(left + s.caps.Slack/2)))
	if l.Err() != nil || l.TimeLeft() <= 0 {
		if !time.Now().Before(extended) {
			return collect("the check past the original expiry came after the extended lease's deadline")
		}
		t.Fatalf("extended lease ended at its original TTL: %v", l.Err())
	}
	switch lp, err := probe.Mutex(name).TryLock(t.Context()); {
	case err == nil && l.Err() == nil && l.TimeLeft() > 0:
		_ = lp.Unlock(t.Context())
		t.Fatalf("TryLock(%s) succeeded (token %d) while the extended lease was live; want ErrNotAcquired", name, lp.Token())
	case err == nil:
		_ = lp.Unlock(t.Context())
		return collect("the TryLock past the original expiry came after the extended lease ended")
	case !errors.Is(err, dlock.ErrNotAcquired):
		t.Fatalf("TryLock(%s): %v; want ErrNotAcquired", name, err)
	}
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
	return ""
}

// deadline is a lower bound of l's deadline in the client's view (taken
// before TimeLeft reads the clock), which is never past the store's expiry.
func deadline(l *dlock.Lease) time.Time {
	now := time.Now()
	return now.Add(l.TimeLeft())
}
