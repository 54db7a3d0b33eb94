package drivertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// 1. Mutual exclusion under contention, with an overlap detector and a
// read-sleep-write counter that loses updates if two holders overlap.
func (s *suite) testMutualExclusion(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const workers = 8
	var (
		inside  atomic.Int32
		counter int64  // only touched inside the lock
		last    uint64 // last token seen inside the lock
	)
	done := contendFor(t, workers, 1500*time.Millisecond, 10*time.Second, func(w int) (string, func(context.Context) (*dlock.Lease, error)) {
		return "Lock", clients[w%len(clients)].Mutex(name, dlock.WithTTL(5*time.Second)).Lock
	}, func(w int, l *dlock.Lease) {
		if n := inside.Add(1); n != 1 {
			t.Errorf("worker %d: %d holders inside at once", w, n)
		}
		if tok := l.Token(); tok <= last {
			t.Errorf("worker %d: token %d not above previous holder's %d", w, tok, last)
		} else {
			last = tok
		}
		v := counter
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		counter = v + 1
		inside.Add(-1)
	})
	if counter != done {
		t.Fatalf("counter = %d after %d critical sections: lost updates", counter, done)
	}
	if done < workers {
		t.Fatalf("only %d critical sections in 1.5s with %d workers", done, workers)
	}
	t.Logf("%d critical sections, tokens up to %d", done, last)
}

// contendFor runs workers goroutines on one lock for d: each takes a hold
// again and again with the take take(w) makes for it (what names it), each
// take bounded by wait, runs inside(w, lease) under it and unlocks. A failed
// take or Unlock fails t and stops that worker. It returns, once every
// worker has stopped, how many holds were taken, run and unlocked.
func contendFor(t *testing.T, workers int, d, wait time.Duration,
	take func(w int) (what string, take func(context.Context) (*dlock.Lease, error)), inside func(w int, l *dlock.Lease)) int64 {
	var (
		done atomic.Int64
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			what, take := take(w)
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(t.Context(), wait)
				l, err := take(ctx)
				cancel()
				if err != nil {
					t.Errorf("worker %d: %s: %v", w, what, err)
					return
				}
				inside(w, l)
				if err := l.Unlock(t.Context()); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	return done.Load()
}

// 2. Fencing tokens strictly increase across holders and clients; re-entries
// share a token.
func (s *suite) testTokensIncrease(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	var last uint64
	for i := range 10 {
		c := clients[i%2]
		l := mustLock(t, c.Mutex(name))
		if l.Token() <= last {
			t.Fatalf("round %d: token %d not above %d", i, l.Token(), last)
		}
		last = l.Token()
		unlock(t, l)
	}
	m := clients[0].Mutex(name, dlock.WithOwner(dlock.NewOwnerID()))
	l1 := mustLock(t, m)
	l2 := mustLock(t, m)
	if l1.Token() != l2.Token() || l1.Token() <= last {
		t.Fatalf("re-entry tokens %d, %d; want equal and above %d", l1.Token(), l2.Token(), last)
	}
	unlock(t, l2)
	unlock(t, l1)
}

// 3. TryLock on a held lock gives ErrNotAcquired, from the same client and
// from another one, and leaves the holder alone.
func (s *suite) testTryLockHeld(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	l := mustLock(t, a.Mutex(name))
	wantNotAcquired(t, a, name)
	wantNotAcquired(t, b, name)
	if l.Err() != nil {
		t.Fatalf("holder's lease ended: %v", l.Err())
	}
	unlock(t, l)
	wantAcquired(t, b, name)
}

// 3b. Unlock by a stale owner (whose lease expired and was taken over)
// is refused and leaves the new holder's lock in place.
func (s *suite) testStaleUnlock(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	stale := mustLock(t, a.Mutex(name, dlock.WithTTL(s.caps.TTL), dlock.WithoutRenewal()))
	waitDone(t, stale, s.caps.TTL+s.caps.Slack+2*time.Second, "fixed lease")
	if !errors.Is(stale.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("expired lease Err = %v; want ErrLeaseLost", stale.Err())
	}
	holder := mustLock(t, b.Mutex(name))
	if err := stale.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("stale Unlock = %v; want ErrLeaseLost", err)
	}
	wantNotAcquired(t, a, name)
	if holder.Err() != nil {
		t.Fatalf("new holder's lease ended by a stale Unlock: %v", holder.Err())
	}
	info, err := b.Inspect(t.Context(), name)
	if err != nil || !info.Held || info.Owner != holder.Owner() {
		t.Fatalf("Inspect = %+v, %v; want held by %s", info, err, holder.Owner())
	}
	unlock(t, holder)
	if err := holder.Unlock(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v; want ErrNotHeld", err)
	}

	// The store itself must refuse: a holder that has not yet noticed its
	// lock was taken over (long TTL, no renewal tick yet) unlocks.
	unaware := mustLock(t, a.Mutex(name, dlock.WithTTL(30*time.Second)))
	if err := s.remove(t.Context(), name); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	holder = mustLock(t, b.Mutex(name))
	if err := unaware.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Unlock by the replaced holder = %v; want ErrLeaseLost", err)
	}
	wantNotAcquired(t, a, name)
	unlock(t, holder)
}
