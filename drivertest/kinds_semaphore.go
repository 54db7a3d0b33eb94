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

// The conformance tests of semaphores (see kinds.go).

// The semaphore's count is never exceeded under contention by 8 holders
// over 2 clients; with cut, a further holder's connections are cut while it
// holds a permit, and the count of live holders, it included until its lease
// ends (or, where the server frees it with the connection, until the cut),
// still never exceeds the limit.
func (s *suite) testSemaphoreCount(t *testing.T, cut bool) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const workers, limit = 8, 3
	var (
		inside, most atomic.Int32
		wg           sync.WaitGroup // the cut
	)
	victimLive := func() int32 { return 0 }
	if cut {
		v := s.client(t)
		vl := mustAcquire(t, v.Semaphore(name, limit, dlock.WithTTL(s.caps.TTL)))
		var cutDone atomic.Bool
		victimLive = func() int32 {
			if s.caps.ConnBound && cutDone.Load() || vl.Err() != nil {
				return 0
			}
			return 1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(300 * time.Millisecond)
			cutDone.Store(true) // before the cut: until then the store counts it anyway
			if err := s.h.Cut(t.Context(), v); err != nil {
				t.Errorf("Cut: %v", err)
			}
		}()
	}
	done := contendFor(t, workers, 2*time.Second, 20*time.Second, func(w int) (string, func(context.Context) (*dlock.Lease, error)) {
		return "Acquire", clients[w%2].Semaphore(name, limit, dlock.WithTTL(5*time.Second)).Acquire
	}, func(w int, l *dlock.Lease) {
		n := inside.Add(1)
		if v := victimLive(); n+v > limit {
			t.Errorf("worker %d: %d holders inside (%d of them the cut one) of %d permits", w, n+v, v, limit)
		}
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		inside.Add(-1)
	})
	wg.Wait()
	// (That permits are held together at all is SemaphoreTokens' to show,
	// deterministically: how many overlap here depends on timing.)
	t.Logf("%d holds, at most %d at once", done, most.Load())
}

// Each permit holder has a token of its own; tokens increase.
func (s *suite) testSemaphoreTokens(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	var last uint64
	for i := range 3 {
		p1 := mustAcquire(t, a.Semaphore(name, 2))
		p2 := mustAcquire(t, b.Semaphore(name, 2))
		if p1.Token() <= last || p2.Token() <= p1.Token() {
			t.Fatalf("round %d: permit tokens %d, %d after %d; want increasing", i, p1.Token(), p2.Token(), last)
		}
		last = p2.Token()
		unlock(t, p1)
		unlock(t, p2)
	}
}

// Permits of a dead holder are freed at their TTL (or session end).
func (s *suite) testDeadPermitFreed(t *testing.T) {
	name := lockName(t)
	b := s.client(t)
	a := s.client(t)
	sem := a.Semaphore(name, 2, dlock.WithTTL(s.caps.TTL))
	mustAcquire(t, sem)
	mustAcquire(t, sem)
	l, err := b.Semaphore(name, 2).TryAcquire(t.Context())
	wantRefused(t, "TryAcquire with both permits held", l, err)
	if err := s.h.Cut(t.Context(), a); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), s.caps.TTL+s.caps.Slack+15*time.Second)
	defer cancel()
	var got []*dlock.Lease
	for range 2 {
		l, err := b.Semaphore(name, 2).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire after the holder died: %v", err)
		}
		got = append(got, l)
	}
	t.Logf("dead holder's permits freed after %v", time.Since(start).Round(time.Millisecond))
	for _, l := range got {
		unlock(t, l)
	}
}

// A semaphore opened with another permit count than its live holders' is
// refused with ErrLimitMismatch, at once and also by a blocking Acquire;
// with no live holders the new count replaces the old.
func (s *suite) testLimitMismatch(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	p := mustAcquire(t, a.Semaphore(name, 2))
	if l, err := b.Semaphore(name, 3).TryAcquire(t.Context()); !errors.Is(err, dlock.ErrLimitMismatch) {
		if err == nil {
			unlock(t, l)
		}
		t.Fatalf("TryAcquire with 3 permits while held with 2: %v; want ErrLimitMismatch", err)
	}
	ctx, cancel := waitCtx(t)
	defer cancel()
	if l, err := b.Semaphore(name, 3).Acquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) || ctx.Err() != nil {
		if err == nil {
			unlock(t, l)
		}
		t.Fatalf("Acquire with 3 permits while held with 2: %v (ctx %v); want ErrLimitMismatch before ctx ends", err, ctx.Err())
	}
	unlock(t, p)
	sem3 := b.Semaphore(name, 3)
	ps := []*dlock.Lease{mustAcquire(t, sem3), mustAcquire(t, sem3), mustAcquire(t, sem3)}
	l, err := a.Semaphore(name, 3).TryAcquire(t.Context())
	wantRefused(t, "a fourth permit of 3", l, err)
	for _, l := range ps {
		unlock(t, l)
	}
}

func (s *suite) testSemaphoreInspect(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	p1 := mustAcquire(t, a.Semaphore(name, 3, dlock.WithLabel("permit-one")))
	p2 := mustAcquire(t, b.Semaphore(name, 3))
	info, err := b.Semaphore(name, 1).Inspect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Limit != 3 || len(info.Holders) != 2 || info.Kind != dlock.KindPermit {
		t.Fatalf("Semaphore.Inspect = %+v; want 2 holders of 3 permits", info)
	}
	toks := map[string]uint64{}
	for _, h := range info.Holders {
		toks[h.Owner] = h.Token
		if h.Kind != dlock.KindPermit {
			t.Errorf("holder %+v; want kind permit", h)
		}
		if h.Owner == p1.Owner() && !s.caps.NoLabels && h.Label != "permit-one" {
			t.Errorf("holder label %q; want permit-one", h.Label)
		}
	}
	if toks[p1.Owner()] != p1.Token() || toks[p2.Owner()] != p2.Token() {
		t.Fatalf("holders %+v; want %s:%d and %s:%d", info.Holders, p1.Owner(), p1.Token(), p2.Owner(), p2.Token())
	}
	unlock(t, p1)
	unlock(t, p2)
	info, err = a.Semaphore(name, 1).Inspect(t.Context())
	if err != nil || info.Held || len(info.Holders) != 0 {
		t.Fatalf("Semaphore.Inspect after Unlock = %+v, %v; want free", info, err)
	}
}
