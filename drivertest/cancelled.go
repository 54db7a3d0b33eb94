package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Waits cut short while the lock is freed, for every kind of lock, LockAll
// and elections: the call that returns an error holds nothing and leaves
// nothing in the store, and the call that returns a lease really holds it.
// The cancel and the release race by design, so each test makes a few rounds
// in three orders: cancel first, release first, both at once.

// cancelRound is one round of a cancelled wait: hold takes the lock that
// is waited for and returns its release; wait waits for the lock and returns
// the release of what it got; probe tries, as a third party, to take what
// the waiter would hold, and returns its release.
type cancelRound struct {
	hold  func(t *testing.T, name string) func()
	wait  func(ctx context.Context, name string) (func(), error)
	probe func(t *testing.T, name string) (func(), error)
}

// orders of the cancel and the release, one per round (the last ones at
// once, as races are most likely to show there).
var cancelOrders = []string{"cancel first", "release first", "at once", "at once"}

func (s *suite) runCancelRounds(t *testing.T, r cancelRound) {
	for round, order := range cancelOrders {
		name := fmt.Sprintf("%s-%d", lockName(t), round)
		release := r.hold(t, name)
		ctx, cancel := context.WithCancel(t.Context())
		wait := Go(func() (func(), error) { return r.wait(ctx, name) })
		time.Sleep(150 * time.Millisecond) // the waiter is waiting in the store
		switch order {
		case "cancel first":
			cancel()
			release()
		case "release first":
			release()
			cancel()
		default:
			var wg sync.WaitGroup
			wg.Go(cancel)
			wg.Go(release)
			wg.Wait()
		}
		waited, werr := wait.Result(t, 5*time.Second, fmt.Sprintf("round %d (%s): the cancelled wait", round, order))
		if werr == nil {
			// It may have been granted before the cancel: then it must hold.
			if rel, err := r.probe(t, name); err == nil {
				rel()
				waited()
				t.Fatalf("round %d (%s): the wait returned a lease, but a third party got the lock too", round, order)
			} else if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("round %d (%s): probe: %v", round, order, err)
			}
			waited()
			t.Logf("round %d (%s): granted before the cancel", round, order)
		} else if !errors.Is(werr, context.Canceled) || !errors.Is(werr, dlock.ErrNotAcquired) {
			t.Fatalf("round %d (%s): cancelled wait = %v; want ErrNotAcquired and context.Canceled", round, order, werr)
		}
		rel, err := r.probe(t, name)
		if err != nil {
			t.Fatalf("round %d (%s): after the wait returned (err %v) and the holder released, the lock is not free: %v",
				round, order, werr, err)
		}
		rel()
	}
}

// lease adapts a call returning a lease to one returning its release.
func lease(t *testing.T, l *dlock.Lease, err error) (func(), error) {
	if err != nil {
		return nil, err
	}
	return func() { unlock(t, l) }, nil
}

// A writer whose wait behind a reader is cancelled, and a reader whose wait
// behind a writer is cancelled.
func (s *suite) testRWCancelledWaitTakesNothing(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	probe := func(t *testing.T, name string) (func(), error) {
		l, err := c.RWMutex(name).TryLock(t.Context())
		return lease(t, l, err)
	}
	for _, rc := range []struct {
		name string
		hold func(*testing.T, *dlock.RWMutex) *dlock.Lease
		wait func(*dlock.RWMutex, context.Context) (*dlock.Lease, error)
	}{
		{"Writer", mustRLock, (*dlock.RWMutex).Lock},
		{"Reader", mustWLock, (*dlock.RWMutex).RLock},
	} {
		t.Run(rc.name, func(t *testing.T) {
			s.runCancelRounds(t, cancelRound{
				hold: func(t *testing.T, name string) func() {
					l := rc.hold(t, a.RWMutex(name))
					return func() { unlock(t, l) }
				},
				wait: func(ctx context.Context, name string) (func(), error) {
					l, err := rc.wait(b.RWMutex(name), ctx)
					return lease(t, l, err)
				},
				probe: probe,
			})
		})
	}
}

// A permit waiter of a full semaphore whose wait is cancelled.
func (s *suite) testSemaphoreCancelledWaitTakesNothing(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	s.runCancelRounds(t, cancelRound{
		hold: func(t *testing.T, name string) func() {
			l := mustAcquire(t, a.Semaphore(name, 1))
			return func() { unlock(t, l) }
		},
		wait: func(ctx context.Context, name string) (func(), error) {
			l, err := b.Semaphore(name, 1).Acquire(ctx)
			return lease(t, l, err)
		},
		probe: func(t *testing.T, name string) (func(), error) {
			l, err := c.Semaphore(name, 1).TryAcquire(t.Context())
			return lease(t, l, err)
		},
	})
}

// A LockAll that took its first lock and waits for its second when its ctx
// is cancelled: neither lock (nor the third, never tried) is left held.
func (s *suite) testLockAllCancelled(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	members := func(name string) []string { return []string{name + "/a", name + "/b", name + "/c"} }
	// group takes the three members by cl with lockAll (LockAll or TryLockAll).
	group := func(ctx context.Context, t *testing.T, cl *dlock.Client, name string,
		lockAll func(context.Context, ...dlock.NamedLocker) (*dlock.Group, error)) (func(), error) {
		var ms []dlock.NamedLocker
		for _, n := range members(name) {
			ms = append(ms, cl.Mutex(n))
		}
		g, err := lockAll(ctx, ms...)
		if err != nil {
			return nil, err
		}
		return func() {
			if err := g.Unlock(t.Context()); err != nil {
				t.Errorf("group Unlock: %v", err)
			}
		}, nil
	}
	s.runCancelRounds(t, cancelRound{
		hold: func(t *testing.T, name string) func() {
			l := mustLock(t, a.Mutex(members(name)[1]))
			return func() { unlock(t, l) }
		},
		wait: func(ctx context.Context, name string) (func(), error) {
			return group(ctx, t, b, name, dlock.LockAll)
		},
		probe: func(t *testing.T, name string) (func(), error) {
			return group(t.Context(), t, c, name, dlock.TryLockAll)
		},
	})
}

// A Campaign cancelled as the leader resigns: a candidate that gave up
// does not lead afterwards, and the next candidate leads at once.
func (s *suite) testCampaignCancelled(t *testing.T) {
	a, b, c := s.client(t), s.client(t), s.client(t)
	s.runCancelRounds(t, cancelRound{
		hold: func(t *testing.T, name string) func() {
			term := campaign(t, a.Election(name), "a")
			return func() {
				if err := term.Resign(t.Context()); err != nil {
					t.Errorf("Resign: %v", err)
				}
			}
		},
		wait: func(ctx context.Context, name string) (func(), error) {
			term, err := b.Election(name).Campaign(ctx, "b")
			if err != nil {
				return nil, err
			}
			return func() {
				if err := term.Resign(t.Context()); err != nil {
					t.Errorf("Resign: %v", err)
				}
			}, nil
		},
		probe: func(t *testing.T, name string) (func(), error) {
			// A campaign has no try form: one that does not lead within
			// a second is refused (the lead is then someone else's).
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			term, err := c.Election(name).Campaign(ctx, "c")
			if err != nil {
				ld, lerr := c.Election(name).Leader(t.Context())
				return nil, fmt.Errorf("%w (leader %+v, %v)", err, ld, lerr)
			}
			return func() {
				if err := term.Resign(t.Context()); err != nil {
					t.Errorf("Resign: %v", err)
				}
			}, nil
		},
	})
}
