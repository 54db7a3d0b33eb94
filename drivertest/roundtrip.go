package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// 7c. An attempt whose ctx deadline ends during the store's round trip:
// when TryLock or Lock fails, the lock is free (no hold whose reply was cut
// off, no backend still holding it); when it returns a lease, the lease is
// held.
func (s *suite) testDeadlineInRoundTrip(t *testing.T) {
	a, c := s.client(t), s.client(t)
	s.runDeadlineRounds(t, func(ctx context.Context, name string, try bool) (*dlock.Lease, error) {
		if try {
			return a.Mutex(name).TryLock(ctx)
		}
		return a.Mutex(name).Lock(ctx)
	}, func(name string) (*dlock.Lease, error) { return c.Mutex(name).TryLock(t.Context()) })
}

// The same for a read-write lock's write lock and a semaphore's permit.
func (s *suite) testKindsDeadlineInRoundTrip(t *testing.T, rw bool) {
	a, c := s.client(t), s.client(t)
	if rw {
		s.runDeadlineRounds(t, func(ctx context.Context, name string, try bool) (*dlock.Lease, error) {
			if try {
				return a.RWMutex(name).TryLock(ctx)
			}
			return a.RWMutex(name).Lock(ctx)
		}, func(name string) (*dlock.Lease, error) { return c.RWMutex(name).TryLock(t.Context()) })
		return
	}
	s.runDeadlineRounds(t, func(ctx context.Context, name string, try bool) (*dlock.Lease, error) {
		if try {
			return a.Semaphore(name, 1).TryAcquire(ctx)
		}
		return a.Semaphore(name, 1).Acquire(ctx)
	}, func(name string) (*dlock.Lease, error) { return c.Semaphore(name, 1).TryAcquire(t.Context()) })
}

// runDeadlineRounds makes 20 attempts at free locks with lock (try or
// wait, in turn) under deadlines aimed at the end of the round trip: drawn
// up to twice a bound that shrinks after an attempt that got through and
// grows after one that did not, so about half are cut short. After each,
// probe (another client's try) must fail while a returned lease is held,
// and succeed once the attempt failed or its lease was unlocked.
func (s *suite) runDeadlineRounds(t *testing.T, lock func(ctx context.Context, name string, try bool) (*dlock.Lease, error),
	probe func(name string) (*dlock.Lease, error)) {
	bound := time.Millisecond
	failed, held := 0, 0
	for round := range 20 {
		name := fmt.Sprintf("%s-%d", lockName(t), round)
		d := time.Duration(rand.Int64N(int64(2*bound) + 1))
		ctx, cancel := context.WithTimeout(t.Context(), d)
		began := time.Now()
		l, err := lock(ctx, name, round%2 == 0)
		took := time.Since(began)
		cancel()
		if err == nil {
			held, bound = held+1, bound*4/5
			if p, perr := probe(name); perr == nil {
				_ = p.Unlock(t.Context())
				t.Fatalf("round %d: a lease was returned but another client got the lock too", round)
			}
			unlock(t, l)
		} else {
			failed, bound = failed+1, bound*5/4
		}
		p, perr := probe(name)
		if perr != nil {
			if errors.Is(perr, dlock.ErrNotAcquired) {
				t.Fatalf("round %d (deadline %v, took %v): after the attempt (err %v) the lock is held: %v", round, d, took, err, perr)
			}
			t.Fatalf("round %d: probe: %v", round, perr)
		}
		unlock(t, p)
	}
	t.Logf("%d failed, %d held; deadlines up to %v at the end", failed, held, 2*bound)
}
