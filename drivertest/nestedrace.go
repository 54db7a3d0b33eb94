package drivertest

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// NestedLockRacingUnlock runs rounds in which a nested Lock on a (its ctx
// carries the outer lease, so it re-enters the hold) races the Unlock of
// that lease, the hold's last, under a fixed owner. The nested Lock must get
// a lease, never an error, and once every lease is unlocked, b must get the
// lock at once: the store keeps no count that nobody releases. maxLead
// bounds the random head start of the nested Lock.
//
// The conformance suite runs it on every backend (NestedLockRacingUnlock,
// with a lead fitted to the store's round trip); call it directly for more
// rounds or a lead of your own.
func NestedLockRacingUnlock(t *testing.T, a, b *dlock.Client, rounds int, maxLead time.Duration) {
	t.Helper()
	nestedRace{prefix: "nested-race", rounds: rounds, maxLead: maxLead, fixedOwner: true}.run(t, a, b)
}

// nestedRace is a run of NestedLockRacingUnlock.
type nestedRace struct {
	prefix  string // of the lock names, one a round
	rounds  int
	maxLead time.Duration // bound of the head start
	// fixedOwner: the Mutex is made WithOwner, so the nested Lock re-enters
	// by owner id (and the owner's last Unlock releases one count); else
	// each outer Lock gets a fresh owner, the nested one takes it from the
	// lease its ctx carries, and the last Unlock releases every count.
	fixedOwner bool
	// unlockFirstEvery: every nth round (0: none) the Unlock gets the head
	// start, so that the nested Lock also meets a hold detached and its
	// release under way.
	unlockFirstEvery int
}

func (r nestedRace) run(t *testing.T, a, b *dlock.Client) {
	t.Helper()
	ctx := t.Context()
	for round := range r.rounds {
		name := r.prefix + "/" + dlock.NewOwnerID()
		opts := []dlock.Option{dlock.WithTTL(time.Minute)}
		if r.fixedOwner {
			opts = append(opts, dlock.WithOwner(dlock.NewOwnerID()))
		}
		m := a.Mutex(name, opts...)
		outer, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var unlockDelay, lockDelay time.Duration
		if r.unlockFirstEvery > 0 && round%r.unlockFirstEvery == r.unlockFirstEvery-1 {
			lockDelay = rand.N(r.maxLead)
		} else {
			unlockDelay = rand.N(r.maxLead) // either may come first
		}
		// Bounded: a count left in the store would make a nested Lock that
		// came after the release wait for the minute's TTL.
		nctx, cancel := context.WithTimeout(dlock.ContextWithLease(ctx, outer), 15*time.Second)
		var nested *dlock.Lease
		var nerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(lockDelay)
			nested, nerr = m.Lock(nctx)
		}()
		go func() {
			defer wg.Done()
			time.Sleep(unlockDelay)
			if err := outer.Unlock(ctx); err != nil {
				t.Errorf("round %d: outer Unlock: %v", round, err)
			}
		}()
		wg.Wait()
		cancel()
		if nerr != nil {
			info, _ := b.Inspect(ctx, name)
			t.Fatalf("round %d: nested Lock racing the outer Unlock = %v; the store has %+v", round, nerr, info)
		}
		if err := nested.Unlock(ctx); err != nil {
			t.Fatalf("round %d: nested Unlock: %v", round, err)
		}
		l, err := b.Mutex(name).TryLock(ctx)
		if err != nil {
			info, _ := b.Inspect(ctx, name)
			t.Fatalf("round %d: every lease unlocked, yet TryLock = %v; the store has %+v", round, err, info)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testNestedLockRacingUnlock runs NestedLockRacingUnlock's race on the
// backend, under a fixed owner and under an owner the nested Lock takes from
// its ctx's lease: where the store counts holds, a re-entry counted there
// while the hold's last Unlock releases it must give its count back; where
// dlock counts them (every other store), a re-entry must not join a hold
// being released, and a Lock after it must wait for that release. Either
// way, once every lease is unlocked another client gets the lock at once.
// The lead is fitted to the store: up to two of its round trips, so that
// the nested Lock's store call and the Unlock's overlap in every order.
func (s *suite) testNestedLockRacingUnlock(t *testing.T) {
	a, b := s.client(t), s.client(t)
	lead := roundTrip(t, a, lockName(t)+"/rtt")
	const rounds = 60 // each way, with every fourth round's Unlock first
	for _, fixed := range []bool{true, false} {
		mode := "FixedOwner"
		if !fixed {
			mode = "OwnerFromCtx"
		}
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			nestedRace{prefix: lockName(t), rounds: rounds, maxLead: lead, fixedOwner: fixed, unlockFirstEvery: 4}.run(t, a, b)
			t.Logf("%d rounds, lead < %v: %v", rounds, lead, time.Since(start).Round(time.Millisecond))
		})
	}
}

// roundTrip is the median time of an uncontended Lock and Unlock of name on
// c (twice the store's round trip, or so), within [50µs, 5ms].
func roundTrip(t *testing.T, c *dlock.Client, name string) time.Duration {
	t.Helper()
	var d [5]time.Duration
	for i := range d {
		start := time.Now()
		unlock(t, mustLock(t, c.Mutex(name)))
		d[i] = time.Since(start)
	}
	slices.Sort(d[:])
	return min(max(d[len(d)/2], 50*time.Microsecond), 5*time.Millisecond)
}
