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
	// kind is the lock raced (the zero value: a Mutex).
	kind raceKind
}

// raceKind is a kind of lock a nestedRace takes: a Mutex, a read or write
// hold of an RWMutex, a permit of a one-permit Semaphore.
type raceKind struct {
	// take returns the Lock of the lock named name on c, made with opts.
	take func(c *dlock.Client, name string, opts ...dlock.Option) func(context.Context) (*dlock.Lease, error)
	// try returns a single attempt by a new owner on c that any hold left
	// on the lock refuses (for a read hold: the write lock's).
	try func(c *dlock.Client, name string) func(context.Context) (*dlock.Lease, error)
	// inspect describes the lock, for the failure messages.
	inspect func(ctx context.Context, c *dlock.Client, name string) (dlock.Info, error)
}

// The kinds of lock raceKind takes.
var (
	mutexKind = raceKind{
		take: func(c *dlock.Client, name string, opts ...dlock.Option) func(context.Context) (*dlock.Lease, error) {
			return c.Mutex(name, opts...).Lock
		},
		try: func(c *dlock.Client, name string) func(context.Context) (*dlock.Lease, error) {
			return c.Mutex(name).TryLock
		},
		inspect: func(ctx context.Context, c *dlock.Client, name string) (dlock.Info, error) {
			return c.Inspect(ctx, name)
		},
	}
	readKind = raceKind{
		take: func(c *dlock.Client, name string, opts ...dlock.Option) func(context.Context) (*dlock.Lease, error) {
			return c.RWMutex(name, opts...).RLock
		},
		try: func(c *dlock.Client, name string) func(context.Context) (*dlock.Lease, error) {
			return c.RWMutex(name).TryLock
		},
		inspect: func(ctx context.Context, c *dlock.Client, name string) (dlock.Info, error) {
			return c.RWMutex(name).Inspect(ctx)
		},
	}
	writeKind = raceKind{
		take: func(c *dlock.Client, name string, opts ...dlock.Option) func(context.Context) (*dlock.Lease, error) {
			return c.RWMutex(name, opts...).Lock
		},
		try: readKind.try, inspect: readKind.inspect,
	}
	permitKind = raceKind{
		take: func(c *dlock.Client, name string, opts ...dlock.Option) func(context.Context) (*dlock.Lease, error) {
			return c.Semaphore(name, 1, opts...).Acquire
		},
		try: func(c *dlock.Client, name string) func(context.Context) (*dlock.Lease, error) {
			return c.Semaphore(name, 1).TryAcquire
		},
		inspect: func(ctx context.Context, c *dlock.Client, name string) (dlock.Info, error) {
			return c.Semaphore(name, 1).Inspect(ctx)
		},
	}
)

// lockKind is the kind of lock r races: a Mutex unless it names another.
func (r nestedRace) lockKind() raceKind {
	if r.kind.take == nil {
		return mutexKind
	}
	return r.kind
}

func (r nestedRace) run(t *testing.T, a, b *dlock.Client) {
	t.Helper()
	ctx := t.Context()
	kind := r.lockKind()
	for round := range r.rounds {
		name := r.prefix + "/" + dlock.NewOwnerID()
		opts := []dlock.Option{dlock.WithTTL(time.Minute)}
		if r.fixedOwner {
			opts = append(opts, dlock.WithOwner(dlock.NewOwnerID()))
		}
		take := kind.take(a, name, opts...)
		outer, err := take(ctx)
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
			nested, nerr = take(nctx)
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
			info, _ := kind.inspect(ctx, b, name)
			t.Fatalf("round %d: nested Lock racing the outer Unlock = %v; the store has %+v", round, nerr, info)
		}
		if err := nested.Unlock(ctx); err != nil {
			t.Fatalf("round %d: nested Unlock: %v", round, err)
		}
		l, err := kind.try(b, name)(ctx)
		if err != nil {
			info, _ := kind.inspect(ctx, b, name)
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
	s.testNestedRace(t, mutexKind, 60)
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

// unlocksTogether runs rounds in which the two leases of one hold, a Lock
// and a nested one under a fixed owner (where the store counts holds, the
// row's two counts), are unlocked at about the same moment, either first by
// up to maxLead. Neither Unlock may report the lease lost, and then b must
// get the lock at once.
func (r nestedRace) unlocksTogether(t *testing.T, a, b *dlock.Client) {
	t.Helper()
	ctx := t.Context()
	kind := r.lockKind()
	for round := range r.rounds {
		name := r.prefix + "/" + dlock.NewOwnerID()
		take := kind.take(a, name, dlock.WithTTL(time.Minute), dlock.WithOwner(dlock.NewOwnerID()))
		outer, err := take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		nctx, cancel := context.WithTimeout(dlock.ContextWithLease(ctx, outer), 15*time.Second)
		nested, err := take(nctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: nested Lock: %v", round, err)
		}
		var wg sync.WaitGroup
		for i, l := range []*dlock.Lease{outer, nested} {
			delay := rand.N(r.maxLead)
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				if err := l.Unlock(ctx); err != nil {
					t.Errorf("round %d: Unlock of lease %d of 2, together with the other: %v", round, i+1, err)
				}
			}()
		}
		wg.Wait()
		l, err := kind.try(b, name)(ctx)
		if err != nil {
			info, _ := kind.inspect(ctx, b, name)
			t.Fatalf("round %d: both leases unlocked, yet another owner's try = %v; the store has %+v", round, err, info)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testKindNestedRace runs testNestedRace on a kind of lock.
func (s *suite) testKindNestedRace(t *testing.T, kind raceKind) { s.testNestedRace(t, kind, 40) }

// testNestedRace runs, on a kind of lock, NestedLockRacingUnlock's race
// under both owner paths and unlocksTogether's, rounds each, every fourth
// round's Unlock first, with a lead fitted to the store.
func (s *suite) testNestedRace(t *testing.T, kind raceKind, rounds int) {
	a, b := s.client(t), s.client(t)
	lead := roundTrip(t, a, lockName(t)+"/rtt")
	for _, mode := range []string{"FixedOwner", "OwnerFromCtx", "UnlocksTogether"} {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			r := nestedRace{prefix: lockName(t), rounds: rounds, maxLead: lead, fixedOwner: mode == "FixedOwner",
				unlockFirstEvery: 4, kind: kind}
			if mode == "UnlocksTogether" {
				r.unlocksTogether(t, a, b)
			} else {
				r.run(t, a, b)
			}
			t.Logf("%d rounds, lead < %v: %v", rounds, lead, time.Since(start).Round(time.Millisecond))
		})
	}
}
